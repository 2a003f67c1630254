"""Matrix multiplication with a short reduction dimension: output-bandwidth bound."""

import torch
import torch.nn as nn
import torch.nn.functional as F

M = 8192
K = 64
N = 8192

SMALL_SIZES = {"M": 1024, "K": 16, "N": 1024}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
