# expect: memory=1 compute=0 parallelism=0
# The kernel computes the inner polynomial; tanh and the product stay in torch (multi-pass).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def inner_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = 0.7978845608 * (x + 0.044715 * x * x * x)
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        inner = torch.empty_like(x)
        n = x.numel()
        inner_kernel[(triton.cdiv(n, 1024),)](x, inner, n, BLOCK=1024)
        return 0.5 * x * (1.0 + torch.tanh(inner))
