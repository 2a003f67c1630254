"""Matrix multiplication with a transposed right operand: X @ W^T (as in a linear layer without bias)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

M = 4096
K = 4096
N = 2048

SMALL_SIZES = {"M": 256, "K": 384, "N": 192}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x @ w.t()


def get_inputs():
    return [torch.randn(M, K), torch.randn(N, K)]


def get_init_inputs():
    return []
