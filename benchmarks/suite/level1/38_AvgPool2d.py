"""2-D average pooling (kernel 4, stride 4)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 32
CHANNELS = 64
HEIGHT = 256
WIDTH = 256

SMALL_SIZES = {"BATCH": 4, "CHANNELS": 16, "HEIGHT": 64, "WIDTH": 64}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AvgPool2d(kernel_size=4, stride=4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return []
