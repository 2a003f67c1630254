import torch
import torch.nn as nn


class Model(nn.Module):
    """One nn.Linear and nothing else (a transformer's projection as extraction writes it)."""

    def __init__(self, d_in, d_out):
        super().__init__()
        self.linear0 = nn.Linear(d_in, d_out)

    def forward(self, x):
        return self.linear0(x)


batch_size = 8
seq = 64
d_in = 256
d_out = 384
SMALL_SIZES = {"batch_size": 2, "seq": 12, "d_in": 40, "d_out": 24}


def get_inputs():
    return [torch.randn(batch_size, seq, d_in)]


def get_init_inputs():
    return [d_in, d_out]
