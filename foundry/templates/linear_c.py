"""The `c` backend's Linear kernel (template "linear"): the fused template with every
float32 nn.Linear of the forward run by a C kernel of its own instead of the library's
product: the input (leading dims flattened) times the module's weight, plus its bias.

It is written for few rows (a small batch: a classifier's head, an MLP or a recurrent
cell run on a handful of samples), where the product is the weight read once from
memory: one OpenMP task computes LIN_NR outputs for every row, in blocks of LIN_MR rows,
as dot products of weight rows with input rows along K in SIMD vectors, so each weight
element is loaded once per LIN_MR rows. The library's sgemm reads the weight at a quarter
to a third of the memory's speed there (on 2 cores, a 2 x 8192 by 8192 x 1024 product:
3.2-4.2 ms for torch.addmm, 8-11 GB/s of weight where a 256 MB sum reads 31 GB/s; 0.9-1.4
ms for this kernel). With many rows the library's blocked product is faster; the judge
keeps whichever is.
"""

from __future__ import annotations

TUNABLE_LINEAR_C = {"LIN_NR": [8, 4, 16], "LIN_MR": [2, 4, 1]}

LINEAR_C_SRC = r"""
#define LIN_NR @LIN_NR@
#define LIN_MR @LIN_MR@
#define LIN_VW 8
typedef float foundry_lin_vf __attribute__((vector_size(LIN_VW * 4)));
static inline foundry_lin_vf foundry_lin_load(const float* p) {
    foundry_lin_vf v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
}
void foundry_linear(const float* restrict x, const float* restrict w, const float* restrict bias,
                    float* restrict y, const int64_t* restrict sz) {
    const int64_t M = sz[0], K = sz[1], N = sz[2], HAS_BIAS = sz[3];
    const int64_t tasks = (N + LIN_NR - 1) / LIN_NR;
    const int64_t KV = K - K % LIN_VW;
    #pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < tasks; t++) {
        const int64_t n0 = t * LIN_NR;
        const int64_t nr = N - n0 < LIN_NR ? N - n0 : LIN_NR;
        const float* wr[LIN_NR];
        for (int j = 0; j < LIN_NR; j++) wr[j] = w + (n0 + (j < nr ? j : 0)) * K;
        for (int64_t m0 = 0; m0 < M; m0 += LIN_MR) {
            const int64_t mr = M - m0 < LIN_MR ? M - m0 : LIN_MR;
            const float* xr[LIN_MR];
            for (int i = 0; i < LIN_MR; i++) xr[i] = x + (m0 + (i < mr ? i : 0)) * K;
            foundry_lin_vf acc[LIN_MR][LIN_NR];
            for (int i = 0; i < LIN_MR; i++)
                for (int j = 0; j < LIN_NR; j++) acc[i][j] = (foundry_lin_vf){0};
            for (int64_t k = 0; k < KV; k += LIN_VW) {
                foundry_lin_vf wv[LIN_NR];
                for (int j = 0; j < LIN_NR; j++) wv[j] = foundry_lin_load(wr[j] + k);
                for (int i = 0; i < LIN_MR; i++) {
                    const foundry_lin_vf xv = foundry_lin_load(xr[i] + k);
                    for (int j = 0; j < LIN_NR; j++) acc[i][j] += xv * wv[j];
                }
            }
            for (int64_t i = 0; i < mr; i++) {
                for (int64_t j = 0; j < nr; j++) {
                    float s = 0.f;
                    for (int v = 0; v < LIN_VW; v++) s += acc[i][j][v];
                    for (int64_t k = KV; k < K; k++) s += xr[i][k] * wr[j][k];
                    y[(m0 + i) * N + n0 + j] = HAS_BIAS ? s + bias[n0 + j] : s;
                }
            }
        }
    }
}
"""

LINEAR_C_LAUNCHER = '''class _CLINEAR:
    """An nn.Linear's forward on the module's own weight and bias, as the C kernel
    `foundry_linear` (leading dims of the input flattened into rows)."""

    def __init__(self, linear, lib):
        self.linear = linear
        self.lib = lib
        self.plans = {}

    def __call__(self, x):
        w = self.linear.weight.contiguous()
        b = self.linear.bias
        N, K = w.shape
        rows = x.reshape(-1, K).contiguous()
        M = rows.shape[0]
        sizes = self.plans.get(M)
        if sizes is None:
            sizes = self.plans[M] = torch.tensor([M, K, N, int(b is not None)], dtype=torch.int64)
        out = torch.empty((M, N), dtype=torch.float32, device=x.device)
        if out.numel():
            self.lib.foundry_linear(rows, w, w if b is None else b.contiguous(), out, sizes)
        return out.view(*x.shape[:-1], N)
'''


def linear_c_init_line(index: int, name: str) -> str:
    """The constructor line of `self._lin<index>`, the C kernel of the Linear `self.<name>`."""
    return f"self._lin{index} = _CLINEAR(self.{name}, lib)"
