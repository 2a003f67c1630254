import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Scaled-dot-product attention without a mask (KernelBench level1/97's form)."""

    def __init__(self):
        super().__init__()

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)


batch_size = 4
heads = 4
seq = 256
dim = 64
SMALL_SIZES = {"batch_size": 2, "heads": 2, "seq": 48, "dim": 24}


def get_inputs():
    return [torch.rand(batch_size, heads, seq, dim) for _ in range(3)]


def get_init_inputs():
    return []
