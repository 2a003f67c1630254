"""Honest GPU candidates for the project's level-1 tasks (cuda, triton and cuda_inline
backends), written from templates, for the GPU benchmarks and tests.

`elementwise(task_stem, backend)` returns a candidate file's source; `SPECIAL` holds the
hand-written ones (row softmax, sum reduction). `TASKS` lists what is available.
"""

from __future__ import annotations

from pathlib import Path

SUITE = Path(__file__).resolve().parent / "suite"

# task stem -> (CUDA C expression of v with scalars a, b; Triton expression; defaults a, b)
ELEMENTWISE = {
    "08_ReLU": ("v > 0.f ? v : 0.f", "tl.maximum(v, 0.0)", (0.0, 0.0)),
    "09_LeakyReLU": ("v > 0.f ? v : v * a", "tl.where(v > 0, v, v * a)", (0.01, 0.0)),
    "10_GELU": ("0.5f * v * (1.f + erff(v * 0.70710678118654752f))",
                "0.5 * v * (1.0 + tl.math.erf(v * 0.70710678118654752))", (0.0, 0.0)),
    "11_Sigmoid": ("1.f / (1.f + expf(-v))", "1.0 / (1.0 + tl.exp(-v))", (0.0, 0.0)),
    "12_Tanh": ("tanhf(v)", "2.0 / (1.0 + tl.exp(-2.0 * v)) - 1.0", (0.0, 0.0)),
    "13_SiLU": ("v / (1.f + expf(-v))", "v / (1.0 + tl.exp(-v))", (0.0, 0.0)),
    "20_Softsign": ("v / (1.f + fabsf(v))", "v / (1.0 + tl.abs(v))", (0.0, 0.0)),
    "21_Hardtanh": ("fminf(fmaxf(v, a), b)", "tl.minimum(tl.maximum(v, a), b)", (-1.0, 1.0)),
}

_CUDA = '''"""{stem}: elementwise CUDA kernel (float4 loads, grid-stride), NVRTC backend."""
import torch
import torch.nn as nn
from foundry.kernels import cuda

TUNABLE = {{"BLOCK": [256, 512, 128]}}
PARAMS = {{"BLOCK": 256}}

SRC = r"""
__device__ __forceinline__ float op(float v, float a, float b) {{ return {expr}; }}
extern "C" __global__ void ew_{tag}(const float* __restrict__ x, float* __restrict__ y,
                                   long long n, float a, float b) {{
    long long stride = (long long)gridDim.x * blockDim.x;
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    long long n4 = n >> 2;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float4* y4 = reinterpret_cast<float4*>(y);
    for (long long j = i; j < n4; j += stride) {{
        float4 v = x4[j];
        v.x = op(v.x, a, b); v.y = op(v.y, a, b); v.z = op(v.z, a, b); v.w = op(v.w, a, b);
        y4[j] = v;
    }}
    for (long long j = (n4 << 2) + i; j < n; j += stride) y[j] = op(x[j], a, b);
}}
"""


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()
        d = {defaults!r}
        self.a = float(args[0]) if len(args) > 0 else d[0]
        self.b = float(args[1]) if len(args) > 1 else d[1]
        self.block = int(PARAMS["BLOCK"])
        self.mod = cuda.compile(SRC)

    def forward(self, x):
        x = x.contiguous()
        if x.data_ptr() % 16:
            x = x.clone()
        y = torch.empty_like(x)
        n = x.numel()
        blocks = max(1, min((n // 4 + self.block - 1) // self.block, 132 * 64))
        self.mod.ew_{tag}(x, y, n, self.a, self.b, grid=(blocks,), block=(self.block,))
        return y
'''

_TRITON = '''"""{stem}: elementwise Triton kernel."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

TUNABLE = {{"BLOCK": [1024, 2048, 4096]}}
PARAMS = {{"BLOCK": 1024}}


@triton.jit
def ew_{tag}_kernel(X, Y, N, a, b, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    v = tl.load(X + offs, mask=mask)
    tl.store(Y + offs, {texpr}, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()
        d = {defaults!r}
        self.a = float(args[0]) if len(args) > 0 else d[0]
        self.b = float(args[1]) if len(args) > 1 else d[1]
        self.block = int(PARAMS["BLOCK"])

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        ew_{tag}_kernel[(triton.cdiv(n, self.block),)](x, y, n, self.a, self.b, BLOCK=self.block)
        return y
'''

INLINE_RELU = '''"""ReLU, KernelBench style: torch.utils.cpp_extension.load_inline at import time."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
__global__ void relu_kernel(const float* x, float* y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
torch::Tensor relu_cuda(torch::Tensor x) {
    auto y = torch::empty_like(x);
    long long n = x.numel();
    int threads = 256;
    long long blocks = (n + threads - 1) / threads;
    relu_kernel<<<blocks, threads>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
cpp_src = "torch::Tensor relu_cuda(torch::Tensor x);"
relu_ext = load_inline(name="relu_ext", cpp_sources=cpp_src, cuda_sources=cuda_src,
                       functions=["relu_cuda"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return relu_ext.relu_cuda(x.contiguous())
'''

SOFTMAX_CUDA = '''"""Row softmax: one block per row, three passes over the row held in registers."""
import torch
import torch.nn as nn
from foundry.kernels import cuda

PARAMS = {}
SRC = r"""
__device__ float warp_max(float v) { for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o)); return v; }
__device__ float warp_sum(float v) { for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o); return v; }
extern "C" __global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int cols) {
    __shared__ float red[32];
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;
    float m = -__int_as_float(0x7f800000);
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
    m = warp_max(m);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
    __syncthreads();
    if (threadIdx.x < 32) { float t = threadIdx.x < (blockDim.x >> 5) ? red[threadIdx.x] : -__int_as_float(0x7f800000); t = warp_max(t); if (threadIdx.x == 0) red[0] = t; }
    __syncthreads();
    m = red[0];
    __syncthreads();
    float s = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += __expf(xr[c] - m);
    s = warp_sum(s);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x < 32) { float t = threadIdx.x < (blockDim.x >> 5) ? red[threadIdx.x] : 0.f; t = warp_sum(t); if (threadIdx.x == 0) red[0] = t; }
    __syncthreads();
    float inv = 1.f / red[0];
    for (int c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = __expf(xr[c] - m) * inv;
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = cuda.compile(SRC)

    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.numel() // x.shape[-1], x.shape[-1]
        y = torch.empty_like(x)
        self.mod.softmax_rows(x, y, cols, grid=(rows,), block=(1024,))
        return y
'''

SUM_CUDA = '''"""Sum over dim 1 of (B, R, C), keepdim: one thread per (b, c), coalesced over c."""
import torch
import torch.nn as nn
from foundry.kernels import cuda

PARAMS = {}
SRC = r"""
extern "C" __global__ void sum_dim1(const float* __restrict__ x, float* __restrict__ y, int B, int R, int C) {
    long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (t >= (long long)B * C) return;
    int b = t / C, c = t % C;
    const float* p = x + (long long)b * R * C + c;
    float acc = 0.f;
    #pragma unroll 8
    for (int r = 0; r < R; r++) acc += p[(long long)r * C];
    y[t] = acc;
}
"""


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super().__init__()
        assert dim == 1
        self.mod = cuda.compile(SRC)

    def forward(self, x):
        x = x.contiguous()
        B, R, C = x.shape
        y = torch.empty(B, 1, C, device=x.device, dtype=x.dtype)
        n = B * C
        self.mod.sum_dim1(x, y, B, R, C, grid=((n + 255) // 256,), block=(256,))
        return y
'''

SPECIAL = {("22_Softmax", "cuda"): SOFTMAX_CUDA, ("24_Sum_reduction", "cuda"): SUM_CUDA,
           ("08_ReLU", "cuda_inline"): INLINE_RELU}


def task_path(stem: str) -> Path:
    return SUITE / "level1" / f"{stem}.py"


def candidate(stem: str, backend: str) -> str:
    """Source of an honest candidate for task `stem` with `backend`."""
    if (stem, backend) in SPECIAL:
        return SPECIAL[(stem, backend)]
    if stem not in ELEMENTWISE or backend not in ("cuda", "triton"):
        raise KeyError(f"no {backend} candidate for {stem}")
    expr, texpr, defaults = ELEMENTWISE[stem]
    tag = stem.split("_", 1)[1].lower()
    template = _CUDA if backend == "cuda" else _TRITON
    return template.format(stem=stem, expr=expr, texpr=texpr, tag=tag, defaults=defaults)


TASKS = sorted({*((s, "cuda") for s in ELEMENTWISE), *((s, "triton") for s in ELEMENTWISE),
                *SPECIAL})
