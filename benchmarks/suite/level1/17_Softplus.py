"""Elementwise softplus with beta and threshold."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 8192
DIM = 16384

SMALL_SIZES = {"BATCH": 256, "DIM": 4096}


class Model(nn.Module):
    def __init__(self, beta: float = 1.0, threshold: float = 20.0):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.softplus(x, beta=self.beta, threshold=self.threshold)


def get_inputs():
    return [torch.randn(BATCH, DIM) * 4.0]


def get_init_inputs():
    return [2.0, 10.0]
