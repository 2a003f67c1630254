"""Prefix sum of the elements selected by a boolean mask (others contribute 0)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 4096
LENGTH = 16384

SMALL_SIZES = {"BATCH": 256, "LENGTH": 4096}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x * mask, dim=1)


def get_inputs():
    return [torch.randn(BATCH, LENGTH), torch.rand(BATCH, LENGTH) > 0.5]


def get_init_inputs():
    return []
