import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x):
        return self.ln(x)


batch_size, features, dim1, dim2 = 16, 64, 256, 256
SMALL_SIZES = {"batch_size": 4, "features": 8, "dim1": 32, "dim2": 32}


def get_inputs():
    return [torch.randn(batch_size, features, dim1, dim2)]


def get_init_inputs():
    return [(features, dim1, dim2)]
