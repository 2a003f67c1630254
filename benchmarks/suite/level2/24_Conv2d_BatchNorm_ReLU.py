"""Conv2d, BatchNorm2d in inference form, ReLU."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 32
IN_CHANNELS = 64
OUT_CHANNELS = 128
HEIGHT = 128
WIDTH = 128
KERNEL = 3

SMALL_SIZES = {"BATCH": 4, "IN_CHANNELS": 16, "OUT_CHANNELS": 32, "HEIGHT": 32, "WIDTH": 32, "KERNEL": 3}


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel, padding=1)
        self.bn_weight = nn.Parameter(torch.rand(out_channels) + 0.5)
        self.bn_bias = nn.Parameter(torch.randn(out_channels) * 0.1)
        self.register_buffer("running_mean", torch.randn(out_channels) * 0.1)
        self.register_buffer("running_var", torch.rand(out_channels) * 0.5 + 0.25)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        x = F.batch_norm(x, self.running_mean, self.running_var, self.bn_weight, self.bn_bias, training=False, eps=1e-5)
        return torch.relu(x)


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, KERNEL]
