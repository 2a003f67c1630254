"""A small transformer-style MLP for trying extract -> run -> deploy on a CPU in minutes:
two pre-norm residual blocks (LayerNorm -> Linear -> GELU -> Linear, plus the residual)
and a final LayerNorm.

    python -m foundry.extract benchmarks.models.tiny_mlp:build --out runs/tiny_mlp_tasks
"""

import torch
import torch.nn as nn

BATCH = 256
WIDTH = 256
HIDDEN = 1024
BLOCKS = 2


class Block(nn.Module):
    def __init__(self, width: int, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(self.act(self.fc1(self.norm(x))))


class TinyMLP(nn.Module):
    def __init__(self, width: int = WIDTH, hidden: int = HIDDEN, blocks: int = BLOCKS):
        super().__init__()
        self.blocks = nn.Sequential(*[Block(width, hidden) for _ in range(blocks)])
        self.norm = nn.LayerNorm(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.blocks(x))


def build(seed: int = 0):
    """(model, example_inputs): a seeded TinyMLP and one batch of inputs."""
    torch.manual_seed(seed)
    model = TinyMLP().eval()
    return model, (torch.randn(BATCH, WIDTH),)
