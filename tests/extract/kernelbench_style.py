"""A user's model written as a KernelBench task file: the class is named `Model`, with
`get_inputs` and `get_init_inputs` beside it, and `build` as the SPEC function."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, width=16, hidden=32):
        super().__init__()
        self.fc1 = nn.Linear(width, hidden)
        self.fc2 = nn.Linear(hidden, 8)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return [16, 32]


def build():
    torch.manual_seed(0)
    return Model(*get_init_inputs()).eval(), tuple(get_inputs())
