# expect: memory=1 compute=1 parallelism=0
import torch
import torch.nn as nn
from foundry.kernels import cuda

SRC = r"""
extern "C" __global__ void relu(const float* __restrict__ x, float* __restrict__ y,
                                long long n) {
    // grid-stride loop: consecutive threads touch consecutive elements
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)blockDim.x * gridDim.x) {
        y[i] = fmaxf(__ldg(x + i), 0.f);
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = cuda.compile(SRC)

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        self.mod.relu(x, y, n, grid=(min((n + 255) // 256, 1024),), block=(256,))
        return y
