"""Elementwise LeakyReLU with a configurable negative slope."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 8192
DIM = 16384

SMALL_SIZES = {"BATCH": 256, "DIM": 4096}


class Model(nn.Module):
    def __init__(self, negative_slope: float = 0.01):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.leaky_relu(x, negative_slope=self.negative_slope)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [0.05]
