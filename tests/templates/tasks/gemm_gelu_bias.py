import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Linear, GELU, add a bias, then x * sigmoid(x)."""

    def __init__(self, in_features, out_features):
        super(Model, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.bias = nn.Parameter(torch.randn(out_features) * 0.1)

    def forward(self, x):
        x = self.linear(x)
        x = F.gelu(x) + self.bias
        return x * torch.sigmoid(x)


batch_size = 256
in_features = 512
out_features = 512
SMALL_SIZES = {"batch_size": 64, "in_features": 128, "out_features": 256}


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
