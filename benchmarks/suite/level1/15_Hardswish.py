"""Elementwise Hardswish, inputs spread over its three pieces."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 8192
DIM = 16384

SMALL_SIZES = {"BATCH": 256, "DIM": 4096}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.hardswish(x)


def get_inputs():
    return [torch.randn(BATCH, DIM) * 3.0]


def get_init_inputs():
    return []
