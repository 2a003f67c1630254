# expect: memory=1 compute=1 parallelism=3
# Each program reduces one block, then programs combine through an atomic add.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0, eviction_policy="evict_first")
    tl.atomic_add(out_ptr, tl.sum(x, axis=0))


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.zeros(1, device=x.device, dtype=torch.float32)
        n = x.numel()
        sum_kernel[(triton.cdiv(n, 2048),)](x, out, n, BLOCK=2048)
        return out.reshape(())
