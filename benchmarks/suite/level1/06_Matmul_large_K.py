"""Matrix multiplication with a long reduction dimension (M, N small, K large)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

M = 1024
K = 65536
N = 1024

SMALL_SIZES = {"M": 64, "K": 16384, "N": 64}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
