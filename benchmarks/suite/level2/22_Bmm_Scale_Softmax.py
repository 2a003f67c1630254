"""Batched matmul (attention-score-like), scale, softmax over the last dimension."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 256
M = 512
K = 64
N = 512

SMALL_SIZES = {"BATCH": 16, "M": 128, "K": 32, "N": 128}


class Model(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.softmax(torch.bmm(a, b) * self.scale, dim=-1)


def get_inputs():
    return [torch.randn(BATCH, M, K), torch.randn(BATCH, K, N)]


def get_init_inputs():
    return [0.125]
