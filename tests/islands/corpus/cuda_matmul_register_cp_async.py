# expect: memory=3 compute=3 parallelism=1
# Each thread owns a 4x4 register tile; tiles of A and B arrive through cp.async.
import torch
import torch.nn as nn
from foundry.kernels import cuda

SRC = r"""
#define BM 64
#define BN 64
#define BK 8
#define TM 4
#define TN 4

__device__ __forceinline__ void cp_async4(float* smem, const float* gmem) {
    unsigned addr = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" :: "r"(addr), "l"(gmem));
}

__device__ __forceinline__ void cp_async_wait_all() {
    asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::);
}

// M, N, K multiples of the tile sizes; 256 threads per block.
extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
    __shared__ float As[BK][BM];
    __shared__ float Bs[BK][BN];
    float acc[TM][TN];
    for (int i = 0; i < TM; ++i)
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;
    int tr = threadIdx.x / (BN / TN), tc = threadIdx.x % (BN / TN);
    int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int e = threadIdx.x; e < BM * BK; e += blockDim.x) {
            int r = e / BK, c = e % BK;
            cp_async4(&As[c][r], &A[(row0 + r) * K + k0 + c]);
        }
        for (int e = threadIdx.x; e < BK * BN; e += blockDim.x) {
            int r = e / BN, c = e % BN;
            cp_async4(&Bs[r][c], &B[(k0 + r) * N + col0 + c]);
        }
        cp_async_wait_all();
        __syncthreads();
        for (int k = 0; k < BK; ++k) {
            float a_frag[TM], b_frag[TN];
            for (int i = 0; i < TM; ++i) a_frag[i] = As[k][tr * TM + i];
            for (int j = 0; j < TN; ++j) b_frag[j] = Bs[k][tc * TN + j];
            for (int i = 0; i < TM; ++i)
                for (int j = 0; j < TN; ++j) acc[i][j] += a_frag[i] * b_frag[j];
        }
        __syncthreads();
    }
    for (int i = 0; i < TM; ++i)
        for (int j = 0; j < TN; ++j)
            C[(row0 + tr * TM + i) * N + col0 + tc * TN + j] = acc[i][j];
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = cuda.compile(SRC)

    def forward(self, a, b):
        a = a.contiguous()
        b = b.contiguous()
        M, K = a.shape
        N = b.shape[1]
        c = torch.empty((M, N), device=a.device, dtype=torch.float32)
        self.mod.matmul(a, b, c, M, N, K, grid=(N // 64, M // 64), block=(256,))
        return c
