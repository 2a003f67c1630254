"""Depthwise 2-D convolution (one 3x3 filter per channel, padding 1)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 16
CHANNELS = 128
HEIGHT = 256
WIDTH = 256

SMALL_SIZES = {"BATCH": 4, "CHANNELS": 16, "HEIGHT": 64, "WIDTH": 64}


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, groups=channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [CHANNELS]
