# expect: memory=0 compute=3 parallelism=2
# One warp per row; online max and normaliser, combined across lanes with shuffles.
import torch
import torch.nn as nn
from foundry.kernels import cuda

SRC = r"""
extern "C" __global__ void softmax_rows(const float* x, float* y, int rows, int cols) {
    int row = blockIdx.x;
    int lane = threadIdx.x;
    if (row >= rows) return;
    const float* xr = x + (long long)row * cols;
    float m_run = __int_as_float(0xff800000), l_run = 0.f;  // -inf
    for (int j = lane; j < cols; j += 32) {
        float v = xr[j];
        float m_new = fmaxf(m_run, v);
        l_run = l_run * expf(m_run - m_new) + expf(v - m_new);
        m_run = m_new;
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
        float m_other = __shfl_xor_sync(0xffffffffu, m_run, offset);
        float l_other = __shfl_xor_sync(0xffffffffu, l_run, offset);
        float m_new = fmaxf(m_run, m_other);
        l_run = l_run * expf(m_run - m_new) + l_other * expf(m_other - m_new);
        m_run = m_new;
    }
    for (int j = lane; j < cols; j += 32)
        y[(long long)row * cols + j] = expf(xr[j] - m_run) / l_run;
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = cuda.compile(SRC)

    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty_like(x)
        self.mod.softmax_rows(x, y, rows, cols, grid=(rows,), block=(32,))
        return y
