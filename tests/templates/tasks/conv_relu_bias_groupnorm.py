import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv2d, ReLU, add a per-channel bias, GroupNorm, tanh."""

    def __init__(self, cin, cout, k, groups, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k)
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.1)
        self.gn = nn.GroupNorm(groups, cout)

    def forward(self, x):
        x = self.conv(x)
        x = torch.relu(x) + self.bias
        x = self.gn(x)
        return torch.tanh(x)


batch = 16
cin, cout, k, groups = 3, 16, 3, 4
H = W = 64
SMALL_SIZES = {"batch": 4, "H": 16, "W": 16}


def get_inputs():
    return [torch.randn(batch, cin, H, W)]


def get_init_inputs():
    return [cin, cout, k, groups, (cout, 1, 1)]
