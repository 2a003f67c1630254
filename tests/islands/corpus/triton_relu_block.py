# expect: memory=1 compute=1 parallelism=0
import torch
import torch.nn as nn
import triton
import triton.language as tl

TUNABLE = {"BLOCK": [1024, 256, 4096]}
PARAMS = {"BLOCK": 1024}


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = PARAMS["BLOCK"]

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, self.block),)](x, y, n, BLOCK=self.block)
        return y
