"""Linear layer, divide by a scalar, softplus."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 8192
IN_FEATURES = 2048
OUT_FEATURES = 2048

SMALL_SIZES = {"BATCH": 256, "IN_FEATURES": 512, "OUT_FEATURES": 384}


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, divisor: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.divisor = divisor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.linear(x)
        return F.softplus(x / self.divisor)


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES, 0.25]
