"""3-D convolution, softplus, multiply by a scalar."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 8
IN_CHANNELS = 16
OUT_CHANNELS = 32
DEPTH = 32
HEIGHT = 128
WIDTH = 128

SMALL_SIZES = {"BATCH": 2, "IN_CHANNELS": 4, "OUT_CHANNELS": 8, "DEPTH": 16, "HEIGHT": 32, "WIDTH": 32}


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, scale: float):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, 3)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.softplus(self.conv(x)) * self.scale


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, DEPTH, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, 0.5]
