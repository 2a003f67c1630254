# expect: memory=1 compute=0 parallelism=0
# The kernel adds the bias with float4 loads; the activation is left to torch.
import torch
import torch.nn as nn
from foundry.kernels import cuda

SRC = r"""
extern "C" __global__ void bias_add4(const float4* x, const float4* b, float4* y,
                                     int rows, int cols4) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows * cols4) {
        float4 v = x[i], w = b[i % cols4];
        y[i] = make_float4(v.x + w.x, v.y + w.y, v.z + w.z, v.w + w.w);
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self, features: int = 1024):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))
        self.mod = cuda.compile(SRC)

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, cols = x.shape
        total = rows * (cols // 4)
        self.mod.bias_add4(x, self.bias, y, rows, cols // 4,
                           grid=((total + 255) // 256,), block=(256,))
        return torch.relu(y)
