# expect: memory=1 compute=1 parallelism=3
import torch
import torch.nn as nn
from foundry.kernels import c

SRC = r"""
#include <stdint.h>
void relu(const float* restrict x, float* restrict y, int64_t n) {
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
"""
lib = c.build(SRC)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.relu(x, y, x.numel())
        return y
