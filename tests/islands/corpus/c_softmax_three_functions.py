# expect: memory=0 compute=2 parallelism=1
# Multi-pass: row max, exponentials and row sums, normalisation, as three C functions.
import torch
import torch.nn as nn
from foundry.kernels import c

SRC = r"""
#include <math.h>
#include <stdint.h>
void row_max(const float* x, float* m, int64_t rows, int64_t cols) {
    #pragma omp parallel for
    for (int64_t r = 0; r < rows; r++) {
        float v = -INFINITY;
        for (int64_t j = 0; j < cols; j++) v = fmaxf(v, x[r * cols + j]);
        m[r] = v;
    }
}
void row_exp_sum(const float* x, const float* m, float* y, float* s, int64_t rows,
                 int64_t cols) {
    #pragma omp parallel for
    for (int64_t r = 0; r < rows; r++) {
        float acc = 0.f;
        for (int64_t j = 0; j < cols; j++) {
            y[r * cols + j] = expf(x[r * cols + j] - m[r]);
            acc += y[r * cols + j];
        }
        s[r] = acc;
    }
}
void row_scale(float* y, const float* s, int64_t rows, int64_t cols) {
    #pragma omp parallel for
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < cols; j++) y[r * cols + j] /= s[r];
}
"""
lib = c.build(SRC)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        m = torch.empty(rows, dtype=torch.float32)
        s = torch.empty(rows, dtype=torch.float32)
        y = torch.empty_like(x)
        lib.row_max(x, m, rows, cols)
        lib.row_exp_sum(x, m, y, s, rows, cols)
        lib.row_scale(y, s, rows, cols)
        return y
