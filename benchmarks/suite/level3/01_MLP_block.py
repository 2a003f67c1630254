"""Transformer-style MLP block: LayerNorm, Linear, GELU, Linear, residual add."""

import torch
import torch.nn as nn
import torch.nn.functional as F

TOKENS = 8192
DIM = 1024
HIDDEN = 4096

SMALL_SIZES = {"TOKENS": 256, "DIM": 256, "HIDDEN": 1024}


class Model(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(F.gelu(self.up(self.norm(x))))


def get_inputs():
    return [torch.randn(TOKENS, DIM)]


def get_init_inputs():
    return [DIM, HIDDEN]
