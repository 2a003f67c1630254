"""BatchNorm2d in inference form (fixed running statistics), independent of train/eval mode."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 32
CHANNELS = 64
HEIGHT = 256
WIDTH = 256

SMALL_SIZES = {"BATCH": 4, "CHANNELS": 16, "HEIGHT": 64, "WIDTH": 64}


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(channels) + 0.5)
        self.bias = nn.Parameter(torch.randn(channels) * 0.1)
        self.register_buffer("running_mean", torch.randn(channels) * 0.2)
        self.register_buffer("running_var", torch.rand(channels) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            training=False, eps=1e-5)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [CHANNELS]
