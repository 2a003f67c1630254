# expect: memory=2 compute=2 parallelism=3
# Hierarchical reduction: grid-stride accumulation per thread, warp shuffles, one shared
# slot per warp, the first warp combines them, one atomic per block.
import torch
import torch.nn as nn
from foundry.kernels import cuda

SRC = r"""
__device__ __forceinline__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, offset);
    return v;
}

extern "C" __global__ void sum_all(const float* __restrict__ x, float* out, long long n) {
    __shared__ float warp_sums[32];
    float acc = 0.f;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)blockDim.x * gridDim.x) {
        acc += x[i];
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    acc = warp_sum(acc);
    if (lane == 0) warp_sums[warp] = acc;
    __syncthreads();
    if (warp == 0) {
        acc = lane < (blockDim.x >> 5) ? warp_sums[lane] : 0.f;
        acc = warp_sum(acc);
        if (lane == 0) atomicAdd(out, acc);
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
        out = torch.zeros(1, device=x.device, dtype=torch.float32)
        self.mod.sum_all(x, out, n, grid=(min((n + 255) // 256, 1024),), block=(256,))
        return out.reshape(())
