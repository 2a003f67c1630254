"""LayerNorm over the last dimension with an affine transform."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 16384
DIM = 4096

SMALL_SIZES = {"BATCH": 1024, "DIM": 1024}


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs():
    return [torch.randn(BATCH, DIM) * 2.0 + 1.0]


def get_init_inputs():
    return [DIM]
