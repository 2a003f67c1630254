# expect: memory=2 compute=1 parallelism=0
# 2D tiles; the transpose inside the tile is a layout change Triton stages through
# shared memory.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def transpose_kernel(x_ptr, y_ptr, M, N, sxm, sxn, sym, syn,
                     BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tile = tl.load(x_ptr + rm[:, None] * sxm + rn[None, :] * sxn, mask=mask)
    tl.store(y_ptr + rn[:, None] * sym + rm[None, :] * syn, tl.trans(tile),
             mask=tl.trans(mask))


class ModelNew(nn.Module):
    def forward(self, x):
        M, N = x.shape
        y = torch.empty((N, M), device=x.device, dtype=x.dtype)
        grid = (triton.cdiv(M, 32), triton.cdiv(N, 32))
        transpose_kernel[grid](x, y, M, N, x.stride(0), x.stride(1), y.stride(0), y.stride(1),
                               BM=32, BN=32)
        return y
