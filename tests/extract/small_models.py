"""Small models for the extraction and deployment tests (SPEC functions: each returns
(model, example_inputs))."""

import numpy as np
import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, width)

    def forward(self, x):
        return x + self.fc2(self.act(self.fc1(self.norm(x))))


class SmallMLP(nn.Module):
    def __init__(self, width=16, hidden=32, blocks=2):
        super().__init__()
        self.blocks = nn.Sequential(*[Block(width, hidden) for _ in range(blocks)])
        self.norm = nn.LayerNorm(width)

    def forward(self, x):
        return self.norm(self.blocks(x))


def build_mlp():
    torch.manual_seed(0)
    return SmallMLP().eval(), (torch.randn(8, 16),)


def build_wide_mlp():
    """The same structure with other widths: another model for the run directories of build_mlp."""
    torch.manual_seed(0)
    return SmallMLP(width=24).eval(), (torch.randn(8, 24),)


class Embed(nn.Module):
    def __init__(self, vocab=50, width=16):
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.out = nn.Linear(width, 8)

    def forward(self, ids, x):
        return self.out(self.tok(ids) + x).relu()


def build_embed():
    torch.manual_seed(0)
    return Embed().eval(), (torch.randint(0, 50, (4, 6)), torch.randn(4, 6, 16))


class ConvAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)

    def forward(self, x):
        h = F.relu(self.bn(self.conv(x)))  # (N, 8, H, W)
        q = h.flatten(2).transpose(1, 2)  # (N, HW, 8)
        return F.scaled_dot_product_attention(q, q, q).softmax(-1)


def build_conv_attention():
    torch.manual_seed(0)
    return ConvAttention().eval(), (torch.randn(2, 3, 6, 6),)


@torch.fx.wrap
def numpy_clip(x):
    """A host-side step torch.export cannot trace (it reads the tensor's data)."""
    return torch.from_numpy(np.clip(x.detach().numpy(), -1.0, 1.0))


class HostStep(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        return torch.tanh(self.fc(numpy_clip(x)))


def build_host_step():
    torch.manual_seed(0)
    return HostStep().eval(), (torch.randn(4, 16),)


class Broken(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        return self.fc(x)


def build_broken():
    return Broken(), (torch.randn(4, 7),)


NOT_CALLABLE = 3


def build_mlp_bf16():
    """build_mlp in bfloat16."""
    model, (x,) = build_mlp()
    return model.to(torch.bfloat16), (x.to(torch.bfloat16),)


class TanhGelu(nn.Module):
    """GELU in tanh form written out, as GPT-2's activation module is: a region that is
    exactly one submodule's forward."""

    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(0.7978845608 * (x + 0.044715 * torch.pow(x, 3))))


class GeluNet(nn.Module):
    def __init__(self, twice: bool = False):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.act = TanhGelu()
        self.norm = nn.LayerNorm(16)
        self.twice = twice

    def forward(self, x):
        h = self.act(self.fc(x).unflatten(-1, (2, 8)))
        if self.twice:  # the same submodule called again: neither call is all of it
            h = self.act(h)
        return self.norm(h.flatten(-2) + x)


def build_gelu_net():
    torch.manual_seed(0)
    return GeluNet().eval(), (torch.randn(8, 16),)
