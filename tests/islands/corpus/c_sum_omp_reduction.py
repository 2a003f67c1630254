# expect: memory=0 compute=2 parallelism=2
import torch
import torch.nn as nn
from foundry.kernels import c

SRC = r"""
#include <stdint.h>
void sum_all(const float* x, float* out, int64_t n) {
    double s = 0.0;
    #pragma omp parallel for reduction(+:s)
    for (int64_t i = 0; i < n; i++) {
        s += x[i];
    }
    out[0] = (float)s;
}
"""
lib = c.build(SRC)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty(1, dtype=torch.float32)
        lib.sum_all(x, out, x.numel())
        return out.reshape(())
