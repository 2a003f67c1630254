"""Linear layer, scale, hardtanh, GELU."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 4096
IN_FEATURES = 4096
OUT_FEATURES = 4096

SMALL_SIZES = {"BATCH": 256, "IN_FEATURES": 512, "OUT_FEATURES": 384}


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.linear(x)
        return F.gelu(F.hardtanh(x * self.scale, min_val=-2.0, max_val=2.0))


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES, 3.0]
