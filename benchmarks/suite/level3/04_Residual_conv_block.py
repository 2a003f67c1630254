"""A ResNet basic block: two 3x3 convolutions with batch norm (inference form) and ReLU,
plus the identity shortcut."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 32
CHANNELS = 64
SIZE = 112

SMALL_SIZES = {"BATCH": 4, "CHANNELS": 16, "SIZE": 32}


def _bn(x: torch.Tensor, stats: nn.Module) -> torch.Tensor:
    return F.batch_norm(x, stats.running_mean, stats.running_var, stats.weight, stats.bias,
                        training=False, eps=1e-5)


class _Stats(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(channels) + 0.5)
        self.bias = nn.Parameter(torch.randn(channels) * 0.1)
        self.register_buffer("running_mean", torch.randn(channels) * 0.1)
        self.register_buffer("running_var", torch.rand(channels) * 0.5 + 0.25)


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = _Stats(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = _Stats(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(_bn(self.conv1(x), self.bn1))
        y = _bn(self.conv2(y), self.bn2)
        return torch.relu(y + x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, SIZE, SIZE)]


def get_init_inputs():
    return [CHANNELS]
