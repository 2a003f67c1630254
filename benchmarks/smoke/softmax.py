import torch
import torch.nn as nn


class Model(nn.Module):
    """Softmax over the last dimension of a 2-D tensor."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


batch_size = 16
dim = 16384
SMALL_SIZES = {"batch_size": 16, "dim": 1024}
SHAPE_VARIANTS = [{"batch_size": 5, "dim": 333}]
LEVEL = 1


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
