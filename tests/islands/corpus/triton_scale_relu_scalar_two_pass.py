# expect: memory=0 compute=0 parallelism=0
# Two kernels, one element per program: scale, then ReLU (multi-pass, scalar loads).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, y_ptr, alpha):
    pid = tl.program_id(0)
    x = tl.load(x_ptr + pid)
    tl.store(y_ptr + pid, x * alpha)


@triton.jit
def relu_kernel(y_ptr, out_ptr):
    pid = tl.program_id(0)
    y = tl.load(y_ptr + pid)
    tl.store(out_ptr + pid, tl.where(y > 0, y, 0.0))


class ModelNew(nn.Module):
    def __init__(self, alpha: float = 2.0):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        x = x.contiguous()
        tmp = torch.empty_like(x)
        out = torch.empty_like(x)
        n = x.numel()
        scale_kernel[(n,)](x, tmp, self.alpha)
        relu_kernel[(n,)](tmp, out)
        return out
