"""Transposed 2-D convolution (stride 2 upsampling) followed by LeakyReLU."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 16
IN_CHANNELS = 64
OUT_CHANNELS = 64
HEIGHT = 128
WIDTH = 128

SMALL_SIZES = {"BATCH": 4, "IN_CHANNELS": 16, "OUT_CHANNELS": 16, "HEIGHT": 32, "WIDTH": 32}


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.deconv = nn.ConvTranspose2d(in_channels, out_channels, kernel_size=4, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.leaky_relu(self.deconv(x), negative_slope=0.2)


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS]
