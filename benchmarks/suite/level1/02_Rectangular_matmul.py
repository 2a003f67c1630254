"""Rectangular matrix multiplication (M x K) @ (K x N)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

M = 8192
K = 2048
N = 4096

SMALL_SIZES = {"M": 256, "K": 320, "N": 192}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
