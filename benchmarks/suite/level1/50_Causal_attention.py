"""Causal self-attention written out: softmax(Q K^T / sqrt(d) + causal mask) V."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 16
HEADS = 16
SEQ = 1024
HEAD_DIM = 64

SMALL_SIZES = {"BATCH": 2, "HEADS": 4, "SEQ": 128, "HEAD_DIM": 32}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        seq = q.shape[-2]
        scores = torch.matmul(q, k.transpose(-2, -1)) / (q.shape[-1] ** 0.5)
        mask = torch.ones(seq, seq, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
        return torch.matmul(torch.softmax(scores, dim=-1), v)


def get_inputs():
    shape = (BATCH, HEADS, SEQ, HEAD_DIM)
    return [torch.randn(shape), torch.randn(shape), torch.randn(shape)]


def get_init_inputs():
    return []
