"""KL divergence KL(q || p) per sample between two softmax distributions given as logits."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 65536
CLASSES = 512

SMALL_SIZES = {"BATCH": 2048, "CLASSES": 256}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, p_logits: torch.Tensor, q_logits: torch.Tensor) -> torch.Tensor:
        log_p = torch.log_softmax(p_logits, dim=1)
        log_q = torch.log_softmax(q_logits, dim=1)
        return F.kl_div(log_p, log_q, reduction="none", log_target=True).sum(dim=1)


def get_inputs():
    return [torch.randn(BATCH, CLASSES), torch.randn(BATCH, CLASSES)]


def get_init_inputs():
    return []
