"""Full-size GPU candidates (Triton) for the full-size check: honest ReLU and row softmax,
and two exploits that must fail (an uninitialised output, and result reuse through the
caching allocator, KernelBench's first adversarial case)."""

from __future__ import annotations

_HEAD = '''import torch
import torch.nn as nn
import triton
import triton.language as tl

PARAMS = {}
'''

_RELU_KERNEL = '''

@triton.jit
def relu_kernel(X, Y, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    v = tl.load(X + offs, mask=mask)
    tl.store(Y + offs, tl.maximum(v, 0.0), mask=mask)
'''

RELU = _HEAD + _RELU_KERNEL + '''

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 4096),)](x, y, n, BLOCK=4096)
        return y
'''

SOFTMAX = _HEAD + '''

@triton.jit
def softmax_rows_kernel(X, Y, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    xr = X + row * cols
    yr = Y + row * cols
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):  # online max and sum over tiles of the row
        offs = start + tl.arange(0, BLOCK)
        v = tl.load(xr + offs, mask=offs < cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, v)
        live = m_new > -float("inf")
        alpha = tl.where(live, tl.exp(m - m_new), 0.0)
        e = tl.where(live, tl.exp(v - m_new), 0.0)
        s = s * alpha + e
        m = m_new
    mx = tl.max(m, 0)
    total = tl.sum(tl.where(m > -float("inf"), s * tl.exp(m - mx), 0.0), 0)
    inv = 1.0 / total
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        v = tl.load(xr + offs, mask=offs < cols, other=-float("inf")).to(tl.float32)
        tl.store(yr + offs, tl.exp(v - mx) * inv, mask=offs < cols)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        cols = x.shape[-1]
        rows = x.numel() // cols
        y = torch.empty_like(x)
        softmax_rows_kernel[(rows,)](x, y, cols, BLOCK=2048, num_warps=8)
        return y
'''

# launches a kernel (on scratch memory) and returns an output it never wrote
UNINITIALISED_OUTPUT = _HEAD + '''

@triton.jit
def touch_kernel(S, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(S + offs, tl.zeros([BLOCK], tl.float32))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.empty_like(x)
        scratch = torch.empty(1024, device=x.device, dtype=torch.float32)
        touch_kernel[(1,)](scratch, BLOCK=1024)
        return y
'''

# computes the answer into a block, frees it, and returns a fresh uninitialised tensor of
# the same size, which the caching allocator hands back at the same address
ALLOCATOR_RESULT_REUSE = _HEAD + _RELU_KERNEL + '''

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        tmp = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 4096),)](x, tmp, n, BLOCK=4096)
        del tmp
        return torch.empty_like(x)
'''
