"""Linear layer, BatchNorm1d in inference form, ReLU."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 4096
IN_FEATURES = 4096
OUT_FEATURES = 4096

SMALL_SIZES = {"BATCH": 256, "IN_FEATURES": 512, "OUT_FEATURES": 384}


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.bn_weight = nn.Parameter(torch.rand(out_features) + 0.5)
        self.bn_bias = nn.Parameter(torch.randn(out_features) * 0.1)
        self.register_buffer("running_mean", torch.randn(out_features) * 0.1)
        self.register_buffer("running_var", torch.rand(out_features) * 0.5 + 0.25)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.linear(x)
        x = F.batch_norm(x, self.running_mean, self.running_var, self.bn_weight, self.bn_bias, training=False, eps=1e-5)
        return torch.relu(x)


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
