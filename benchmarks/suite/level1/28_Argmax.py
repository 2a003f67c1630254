"""Argmax over the middle dimension of a 3-D tensor."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 128
ROWS = 1024
COLS = 1024

SMALL_SIZES = {"BATCH": 16, "ROWS": 256, "COLS": 256}


class Model(nn.Module):
    def __init__(self, dim: int = 1):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.argmax(x, dim=self.dim)


def get_inputs():
    return [torch.randn(BATCH, ROWS, COLS)]


def get_init_inputs():
    return [1]
