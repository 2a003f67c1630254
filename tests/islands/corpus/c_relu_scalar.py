# expect: memory=0 compute=1 parallelism=0
import torch
import torch.nn as nn
from foundry.kernels import c

SRC = r"""
#include <stdint.h>
void relu(const float* x, float* y, int64_t n) {
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
