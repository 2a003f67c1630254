"""Smooth L1 loss (beta 0.5: a Huber loss with delta 0.5, divided by 0.5), the mean over every
element: one value."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 16384
DIM = 16384

SMALL_SIZES = {"BATCH": 256, "DIM": 1024}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.smooth_l1_loss(pred, target, beta=0.5)


def get_inputs():
    return [torch.randn(BATCH, DIM), torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
