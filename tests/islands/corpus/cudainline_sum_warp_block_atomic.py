# expect: memory=2 compute=2 parallelism=3
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = """
#include <torch/extension.h>

__global__ void sum_kernel(const float* __restrict__ x, float* out, int64_t n) {
    __shared__ float warp_sums[32];
    float acc = 0.f;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)blockDim.x * gridDim.x) {
        acc += x[i];
    }
    for (int offset = 16; offset > 0; offset >>= 1)
        acc += __shfl_down_sync(0xffffffff, acc, offset);
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) warp_sums[warp] = acc;
    __syncthreads();
    if (warp == 0) {
        acc = lane < blockDim.x / 32 ? warp_sums[lane] : 0.f;
        for (int offset = 16; offset > 0; offset >>= 1)
            acc += __shfl_down_sync(0xffffffff, acc, offset);
        if (lane == 0) atomicAdd(out, acc);
    }
}

torch::Tensor sum_cuda(torch::Tensor x) {
    auto out = torch::zeros({1}, x.options());
    int64_t n = x.numel();
    int blocks = (int)std::min<int64_t>((n + 255) / 256, 1024);
    sum_kernel<<<blocks, 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
    return out.reshape({});
}
"""

cpp_source = "torch::Tensor sum_cuda(torch::Tensor x);"

sum_ext = load_inline(name="sum_ext", cpp_sources=cpp_source, cuda_sources=cuda_source,
                      functions=["sum_cuda"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return sum_ext.sum_cuda(x.contiguous())
