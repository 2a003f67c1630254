"""1-D max pooling with dilation (kernel 4, stride 2, padding 3, dilation 2)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 64
CHANNELS = 128
LENGTH = 65536

SMALL_SIZES = {"BATCH": 4, "CHANNELS": 16, "LENGTH": 4096}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool1d(kernel_size=4, stride=2, padding=2, dilation=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, LENGTH)]


def get_init_inputs():
    return []
