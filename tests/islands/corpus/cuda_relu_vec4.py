# expect: memory=1 compute=1 parallelism=0
import torch
import torch.nn as nn
from foundry.kernels import cuda

SRC = r"""
extern "C" __global__ void relu4(const float4* __restrict__ x, float4* __restrict__ y,
                                 long long n4) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 v = x[i];
        v.x = fmaxf(v.x, 0.f); v.y = fmaxf(v.y, 0.f);
        v.z = fmaxf(v.z, 0.f); v.w = fmaxf(v.w, 0.f);
        y[i] = v;
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = cuda.compile(SRC)

    def forward(self, x):
        x = x.contiguous()
        assert x.numel() % 4 == 0, "this kernel needs a multiple of 4 elements"
        y = torch.empty_like(x)
        n4 = x.numel() // 4
        self.mod.relu4(x, y, n4, grid=((n4 + 255) // 256,), block=(256,))
        return y
