"""Matrix-vector product: (M x K) @ (K x 1)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

M = 16384
K = 8192

SMALL_SIZES = {"M": 2048, "K": 1024}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, v)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, 1)]


def get_init_inputs():
    return []
