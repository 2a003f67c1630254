# expect: memory=0 compute=0 parallelism=0
import torch
import torch.nn as nn
from foundry.kernels import cuda

SRC = r"""
extern "C" __global__ void scale(const float* x, float* y, float alpha, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = alpha * x[i];
}

extern "C" __global__ void relu(const float* y, float* out, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) out[i] = y[i] > 0.f ? y[i] : 0.f;
}
"""


class ModelNew(nn.Module):
    def __init__(self, alpha: float = 2.0):
        super().__init__()
        self.alpha = alpha
        self.mod = cuda.compile(SRC)

    def forward(self, x):
        x = x.contiguous()
        tmp = torch.empty_like(x)
        out = torch.empty_like(x)
        n = x.numel()
        grid = ((n + 255) // 256,)
        self.mod.scale(x, tmp, self.alpha, n, grid=grid, block=(256,))
        self.mod.relu(tmp, out, n, grid=grid, block=(256,))
        return out
