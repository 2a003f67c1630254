"""A small image classifier: three conv / batch-norm (inference form) / ReLU / max-pool
stages, then a linear classifier on the flattened features."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 64
IMAGE = 128
CLASSES = 100

SMALL_SIZES = {"BATCH": 4, "IMAGE": 64, "CLASSES": 10}


class Stage(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False)
        self.weight = nn.Parameter(torch.rand(out_channels) + 0.5)
        self.bias = nn.Parameter(torch.randn(out_channels) * 0.1)
        self.register_buffer("running_mean", torch.randn(out_channels) * 0.1)
        self.register_buffer("running_var", torch.rand(out_channels) * 0.5 + 0.25)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.batch_norm(self.conv(x), self.running_mean, self.running_var, self.weight, self.bias,
                         training=False, eps=1e-5)
        return F.max_pool2d(torch.relu(x), kernel_size=2)


class Model(nn.Module):
    def __init__(self, image: int, classes: int):
        super().__init__()
        self.stages = nn.Sequential(Stage(3, 32), Stage(32, 64), Stage(64, 128))
        self.classifier = nn.Linear(128 * (image // 8) ** 2, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.stages(x), 1))


def get_inputs():
    return [torch.randn(BATCH, 3, IMAGE, IMAGE)]


def get_init_inputs():
    return [IMAGE, CLASSES]
