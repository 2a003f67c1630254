"""The Triton template for a forward that is one matrix product of two inputs: one
tiled Triton matmul reading both operands through their strides (a broadcast operand is
never copied; with K_CONTIGUOUS a float32 operand whose K dim is not its contiguous one
is copied once so that it is, by layout_copy_triton's tiled copy), tiles in grouped order
(GROUP_M), accumulating in float32 (float32 tiles multiplied as dot_precision.F32_DOT
says). With SPLIT_K > 1 the K range is cut into slices, one program per (tile, slice,
batch) writing its float32 partial tile to a [SPLIT_K, batch, M, N] workspace, and a
second kernel sums the slices in slice order (deterministic: no atomics) into the output.
Unit strides are constexprs, so the compiler sees which dim of each tile is contiguous.
A product whose B is one column (N == 1, a matrix-vector product) runs, with GEMV on, a
kernel without tensor cores: GEMV_ROWS rows a program, each GEMV_BLOCK_K-wide step of A
multiplied by B's slice and summed in float32 on the FMA units, so no tile of mostly
masked columns is computed; split-K as above."""

from __future__ import annotations

from foundry.templates.candidate import assemble
from foundry.templates.dot_precision import F32_DOT_LAUNCH_ARG, dot_precision_arg, dot_precision_tunable
from foundry.templates.ir import Description, Gemm
from foundry.templates.layout_copy_triton import KERNEL as COPY_KERNEL
from foundry.templates.layout_copy_triton import LAUNCHER as COPY_LAUNCHER
from foundry.templates.matmul_triton import GROUPED_TILES
from foundry.templates.tiles import block_for, default_first

# defaults: the fastest on the H200 of a fixed grid of configurations over KernelBench's
# lone products (benchmarks/product_configs_gpu.py)
TUNABLE_GEMM = {"BLOCK_M": [128, 64, 32, 16], "BLOCK_N": [128, 64, 32, 16], "BLOCK_K": [32, 16, 64],
                "SPLIT_K": [1, 2, 4, 8, 16, 32, 64, 128], "GROUP_M": [8, 1], "num_warps": [8, 4, 2],
                "num_stages": [3, 4, 2]}
TARGET_PROGRAMS = 264  # two programs per SM of an H200 (132 SMs)
MAX_PROGRAMS = 8 * TARGET_PROGRAMS  # a split that leaves more programs than this adds only partials
MIN_SLICE_BLOCKS = 4  # a K slice keeps at least this many BLOCK_K steps
# the matrix-vector kernel's tunables, offered where the traced B has one column
TUNABLE_GEMV = {"GEMV": [1, 0], "GEMV_ROWS": [8, 4, 16, 2], "GEMV_BLOCK_K": [512, 1024, 256]}
SUM_BLOCK = 1024  # elements per program of the kernel summing the slices


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def gemm_tunable(gemm: Gemm) -> dict:
    """TUNABLE_GEMM for `gemm`'s traced sizes, each default first: tiles no larger than a
    small M or N needs; SPLIT_K only where a slice keeps MIN_SLICE_BLOCKS steps of the
    smallest BLOCK_K and the programs stay within MAX_PROGRAMS, its default the smallest
    split bringing the programs to TARGET_PROGRAMS (1 when the tiles alone do), each slice
    keeping MIN_SLICE_BLOCKS steps of the default BLOCK_K."""
    tun = {k: list(v) for k, v in TUNABLE_GEMM.items()}
    bm = block_for(gemm.m, tun["BLOCK_M"])
    bn = block_for(gemm.n, tun["BLOCK_N"])
    bk = tun["BLOCK_K"][0]
    tiles = gemm.batch * _cdiv(gemm.m, bm) * _cdiv(gemm.n, bn)
    splits = [s for s in tun["SPLIT_K"] if s == 1 or (
        tiles * s <= MAX_PROGRAMS and gemm.k >= s * MIN_SLICE_BLOCKS * min(tun["BLOCK_K"]))]
    split = 1
    for s in splits:
        if gemm.k < s * MIN_SLICE_BLOCKS * bk:
            break
        split = s
        if tiles * s >= TARGET_PROGRAMS:
            break
    tun.update(BLOCK_M=default_first(bm, tun["BLOCK_M"]), BLOCK_N=default_first(bn, tun["BLOCK_N"]),
               SPLIT_K=default_first(split, splits))
    tun.update(dot_precision_tunable(gemm.dtype))
    if gemm.dtype == "float32":
        tun["K_CONTIGUOUS"] = [1, 0]
    if gemm.n == 1:
        tun.update({k: list(v) for k, v in TUNABLE_GEMV.items()})
    return tun


KERNELS = '''@triton.jit
def _gemm(a, b, c, M, N, K, K_SLICE, s_ab, s_am: tl.constexpr, s_ak: tl.constexpr, s_bb,
          s_bk: tl.constexpr, s_bn: tl.constexpr, s_cs, s_cb, s_cm, s_cn: tl.constexpr,
          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
          F32_DOT: tl.constexpr):
    pid = tl.program_id(0)
    s = tl.program_id(1)
    z = tl.program_id(2).to(tl.int64)
@TILES@    k_start = s * K_SLICE
    k_stop = tl.minimum(k_start + K_SLICE, K)
    # rows and columns past M and N read row/column 0 again; their results are not stored
    am = tl.where(rm < M, rm, 0).to(tl.int64)
    bn = tl.where(rn < N, rn, 0).to(tl.int64)
    kk = (k_start + rk).to(tl.int64)
    pa = a + z * s_ab + am[:, None] * s_am + kk[None, :] * s_ak
    pb = b + z * s_bb + kk[:, None] * s_bk + bn[None, :] * s_bn
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(k_start, k_stop, BLOCK_K):
        inside = (k0 + rk) < k_stop
        x = tl.load(pa, mask=inside[None, :], other=0.0)
        w = tl.load(pb, mask=inside[:, None], other=0.0)
        acc += tl.dot(x, w@PRECISION@)
        pa += BLOCK_K * s_ak
        pb += BLOCK_K * s_bk
    pc = c + s.to(tl.int64) * s_cs + z * s_cb + rm.to(tl.int64)[:, None] * s_cm + rn.to(tl.int64)[None, :] * s_cn
    tl.store(pc, acc.to(c.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def _gemv(a, b, c, M, K, K_SLICE, s_ab, s_am, s_ak: tl.constexpr, s_bb, s_bk: tl.constexpr, s_cs, s_cb, s_cm,
          ROWS: tl.constexpr, BLOCK_K: tl.constexpr):
    rm = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    s = tl.program_id(1)
    z = tl.program_id(2).to(tl.int64)
    rk = tl.arange(0, BLOCK_K)
    k_start = s * K_SLICE
    k_stop = tl.minimum(k_start + K_SLICE, K)
    am = tl.where(rm < M, rm, 0).to(tl.int64)
    kk = (k_start + rk).to(tl.int64)
    pa = a + z * s_ab + am[:, None] * s_am + kk[None, :] * s_ak
    pb = b + z * s_bb + kk * s_bk
    acc = tl.zeros([ROWS, BLOCK_K], dtype=tl.float32)
    for k0 in range(k_start, k_stop, BLOCK_K):
        inside = (k0 + rk) < k_stop
        x = tl.load(pa, mask=inside[None, :], other=0.0)
        w = tl.load(pb, mask=inside, other=0.0)
        acc += x.to(tl.float32) * w.to(tl.float32)[None, :]
        pa += BLOCK_K * s_ak
        pb += BLOCK_K * s_bk
    pc = c + s.to(tl.int64) * s_cs + z * s_cb + rm.to(tl.int64) * s_cm
    tl.store(pc, tl.sum(acc, axis=1).to(c.dtype.element_ty), mask=rm < M)


@triton.jit
def _gemm_sum_slices(ws, out, numel, SLICES, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < numel
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    p = ws + offs
    for _ in range(0, SLICES):
        acc += tl.load(p, mask=inside, other=0.0)
        p += numel
    tl.store(out + offs, acc.to(out.dtype.element_ty), mask=inside)
'''

LAUNCHER = '''class _GEMM:
    def __init__(self, params):
        self.params = params

    def __call__(self, a, b):
        p = self.params
@TRANSPOSES@        if p.get("K_CONTIGUOUS", 0):
            # an operand whose K dim is not its contiguous one is copied so that it is: the
            # tensor-core product of float32 tiles on Hopper reads K-contiguous tiles only
            if a.stride(-1) != 1:
                a = _with_contiguous_dim(a, -1)
            if b.stride(-2) != 1:
                b = _with_contiguous_dim(b, -2)
        M, K = a.shape[-2], a.shape[-1]
        N = b.shape[-1]
        batch = max(a.shape[0] if a.dim() == 3 else 1, b.shape[0] if b.dim() == 3 else 1)
        out_shape = (batch, M, N) if max(a.dim(), b.dim()) == 3 else (M, N)
        out = torch.empty(out_shape, dtype=a.dtype, device=a.device)
        if out.numel() == 0:
            return out
        if K == 0:
            return out.zero_()
        gemv = N == 1 and bool(int(p.get("GEMV", 0)))
        BM, BN, BK = int(p["BLOCK_M"]), int(p["BLOCK_N"]), int(p["GEMV_BLOCK_K" if gemv else "BLOCK_K"])
        slices = max(1, min(int(p["SPLIT_K"]), triton.cdiv(K, BK)))
        k_slice = triton.cdiv(triton.cdiv(K, slices), BK) * BK
        slices = triton.cdiv(K, k_slice)
        if slices == 1:
            c, s_cs = out, 0
        else:
            c = torch.empty((slices, batch, M, N), dtype=torch.float32, device=a.device)
            s_cs = batch * M * N
        if gemv:
            rows = int(p["GEMV_ROWS"])
            _gemv[(triton.cdiv(M, rows), slices, batch)](
                a, b, c, M, K, k_slice, _batch_stride(a), a.stride(-2), a.stride(-1), _batch_stride(b), b.stride(-2),
                s_cs, M, 1, ROWS=rows, BLOCK_K=BK, num_warps=4)
        else:
            grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN), slices, batch)
            _gemm[grid](a, b, c, M, N, K, k_slice, _batch_stride(a), a.stride(-2), a.stride(-1),
                        _batch_stride(b), b.stride(-2), b.stride(-1), s_cs, M * N, N, 1,
                        BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, GROUP_M=int(p["GROUP_M"]),
                        @F32_DOT_LAUNCH_ARG@, num_warps=int(p["num_warps"]), num_stages=int(p["num_stages"]))
        if slices > 1:
            n = out.numel()
            _gemm_sum_slices[(triton.cdiv(n, @SUM_BLOCK@),)](c, out, n, slices, BLOCK=@SUM_BLOCK@, num_warps=4)
        return out
'''


def emit_gemm(*, desc: Description, task_source: str, tunable: dict, params: dict, header: str) -> str:
    gemm = desc.gemm
    kernels = KERNELS.replace("@TILES@", GROUPED_TILES).replace("@PRECISION@", dot_precision_arg(gemm.dtype))
    transposes = "".join(f"        {x} = {x}.transpose(-2, -1)\n"
                         for x, t in (("a", gemm.trans_a), ("b", gemm.trans_b)) if t)
    launcher = LAUNCHER.replace("@TRANSPOSES@", transposes).replace("@SUM_BLOCK@", str(SUM_BLOCK))
    launcher = launcher.replace("@F32_DOT_LAUNCH_ARG@", F32_DOT_LAUNCH_ARG)
    note = ("Template candidate (triton backend): the matrix product as one tiled Triton matmul "
            "(split-K: SPLIT_K slices of K summed by a second kernel).")
    return assemble(desc=desc, task_source=task_source, backend="triton", header=header,
                    kernel_defs=kernels + "\n\n" + COPY_KERNEL, launchers=[COPY_LAUNCHER, launcher],
                    init_lines=["self._gemm = _GEMM(params)"],
                    tunable=tunable, params=params, note=note)
