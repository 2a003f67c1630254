"""1-D convolution (padding 1) followed by GELU."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 64
IN_CHANNELS = 128
OUT_CHANNELS = 128
LENGTH = 16384
KERNEL = 3

SMALL_SIZES = {"BATCH": 4, "IN_CHANNELS": 32, "OUT_CHANNELS": 32, "LENGTH": 1024, "KERNEL": 3}


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel: int):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel, padding=kernel // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.conv(x))


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, LENGTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, KERNEL]
