# expect: memory=2 compute=2 parallelism=1
# Two passes: per-block tree reduction in shared memory, then the partial sums.
import torch
import torch.nn as nn
from foundry.kernels import cuda

SRC = r"""
extern "C" __global__ void block_sum(const float* x, float* partial, long long n) {
    __shared__ float sdata[256];
    unsigned tid = threadIdx.x;
    long long i = blockIdx.x * (long long)blockDim.x + tid;
    sdata[tid] = i < n ? x[i] : 0.f;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) partial[blockIdx.x] = sdata[0];
}

extern "C" __global__ void final_sum(const float* partial, float* out, int m) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        float s = 0.f;
        for (int j = 0; j < m; ++j) s += partial[j];
        out[0] = s;
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = cuda.compile(SRC)

    def forward(self, x):
        x = x.contiguous()
        n = x.numel()
        blocks = (n + 255) // 256
        partial = torch.empty(blocks, device=x.device, dtype=torch.float32)
        out = torch.empty(1, device=x.device, dtype=torch.float32)
        self.mod.block_sum(x, partial, n, grid=(blocks,), block=(256,))
        self.mod.final_sum(partial, out, blocks, grid=(1,), block=(32,))
        return out.reshape(())
