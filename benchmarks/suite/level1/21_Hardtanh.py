"""Elementwise hardtanh clamp to [min_val, max_val]."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 8192
DIM = 16384

SMALL_SIZES = {"BATCH": 256, "DIM": 4096}


class Model(nn.Module):
    def __init__(self, min_val: float = -1.0, max_val: float = 1.0):
        super().__init__()
        self.min_val = min_val
        self.max_val = max_val

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.hardtanh(x, min_val=self.min_val, max_val=self.max_val)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [-0.5, 1.5]
