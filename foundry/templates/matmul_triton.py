"""Template "matmul": y = epilogue(x @ W^T + b) for an nn.Linear followed by a pointwise
region, as one tiled Triton matmul (fp32 inputs, tiles multiplied as dot_precision.F32_DOT says) whose epilogue
is the region's chain applied to the accumulator before the single store."""

from __future__ import annotations

from foundry.templates.candidate import assemble
from foundry.templates.dot_precision import F32_DOT_LAUNCH_ARG, dot_precision_arg, dot_precision_tunable
from foundry.templates.emit_triton import phase_code
from foundry.templates.ir import Description
from foundry.templates.tiles import fitted_first

# Triton source: program `pid`'s output tile (rows `rm`, columns `rn`) in grouped order
# (GROUP_M tile rows at a time, so neighbouring programs share operand tiles in L2), and
# the K offsets `rk` of one step
GROUPED_TILES = """    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    group = GROUP_M * num_n
    first_m = (pid // group) * GROUP_M
    size_m = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group) % size_m
    pid_n = (pid % group) // size_m
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
"""
# defaults: the fastest on the H200 of a fixed grid of configurations over KernelBench's
# Linear + pointwise problems (benchmarks/product_configs_gpu.py)
# Triton source: `acc`, the float32 tile x[rm, :] @ wt[rn, :]^T (+ bias[rn] if HAS_BIAS) of
# an nn.Linear (x: M x K, its weight wt: N x K, both read K-contiguous)
LINEAR_TILE = f"""    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    pa = x + rm.to(tl.int64)[:, None] * K + rk[None, :]  # int64: M * K can pass 2^31
    pb = wt + rn.to(tl.int64)[None, :] * K + rk[:, None]
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(pa + k0, mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(pb + k0, mask=(rn[None, :] < N) & (kk[:, None] < K), other=0.0)
        acc += tl.dot(a, b{dot_precision_arg("float32")})
    if HAS_BIAS:
        acc += tl.load(bias + rn, mask=rn < N, other=0.0)[None, :]
"""
TUNABLE_MATMUL = {"BLOCK_M": [128, 64, 32, 16], "BLOCK_N": [128, 64, 32], "BLOCK_K": [32, 64, 16],
                  "GROUP_M": [8, 1], "num_warps": [8, 4, 2], "num_stages": [3, 4, 2],
                  **dot_precision_tunable("float32")}


def matmul_tunable(out_shape: tuple) -> dict:
    """TUNABLE_MATMUL for a Linear whose output is `out_shape` (rows, features) at the
    traced sizes, each tile's default the first choice or the smallest covering a smaller
    dim, as for the lone products (gemm_triton): 8 rows get 16-row tiles, not 128-row ones
    that compute 120 rows of padding. Without a shape, TUNABLE_MATMUL as it is."""
    tun = {k: list(v) for k, v in TUNABLE_MATMUL.items()}
    if len(out_shape) == 2:
        for name, size in zip(("BLOCK_M", "BLOCK_N"), out_shape):
            tun[name] = fitted_first(int(size), tun[name])
    return tun


def emit_matmul(*, desc: Description, task_source: str, tunable: dict, params: dict, header: str) -> str:
    region = desc.regions[desc.linear_region]
    pre = region.pre
    others = [k for k in range(len(pre.operands)) if k != region.anchor]
    lines, v = phase_code(pre, "p", "f", "msk")
    # the anchor (the Linear's output) is the accumulator itself
    lines = [ln for ln in lines if not ln.startswith(f"xp{region.anchor} = ")]
    body = "\n".join("    " + ln.replace(f"xp{region.anchor}", "acc") for ln in lines)
    if v == f"xp{region.anchor}":
        v = "acc"
    ptrs = "".join(f", p{k}" for k in others)
    ints = "".join(f", Mp{k}" for k in others if pre.operands[k].layout in ("row", "rowcol"))
    kernel = f'''@triton.jit
def _mm_epilogue(x, wt, bias, out{ptrs}, M, N, K{ints}, HAS_BIAS: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                 F32_DOT: tl.constexpr):
    pid = tl.program_id(0)
{GROUPED_TILES}{LINEAR_TILE}    msk = (rm[:, None] < M) & (rn[None, :] < N)
    r = rm.to(tl.int64)[:, None]
    j = rn[None, :]
    f = r * N + j
    Kp = N
{body}
    tl.store(out + f, {v}, mask=msk)
'''
    mm_args = "".join(f", a{k}" for k in others)
    int_lines = "".join(f"\n        Mp{k} = M" for k in others if pre.operands[k].layout in ("row", "rowcol"))
    int_args = "".join(f", Mp{k}" for k in others if pre.operands[k].layout in ("row", "rowcol"))
    launcher = f'''class _MM:
    def __init__(self, linear, params):
        self.linear = linear
        self.params = params

    def __call__(self, x{mm_args}):
        x = x.contiguous()
        w = self.linear.weight.contiguous()
        b = self.linear.bias
        M, K = x.shape
        N = w.shape[0]{int_lines}
        out = torch.empty((M, N), dtype=torch.float32, device=x.device)
        p = self.params
        grid = (triton.cdiv(M, p["BLOCK_M"]) * triton.cdiv(N, p["BLOCK_N"]),)
        _mm_epilogue[grid](x, w, b if b is not None else w, out{"".join(f", a{k}.contiguous()" for k in others)}, M, N, K{int_args},
                           HAS_BIAS=b is not None, BLOCK_M=p["BLOCK_M"], BLOCK_N=p["BLOCK_N"],
                           BLOCK_K=p["BLOCK_K"], GROUP_M=p["GROUP_M"], num_warps=p["num_warps"],
                           num_stages=p["num_stages"], {F32_DOT_LAUNCH_ARG})
        return out
'''
    # forward: the Linear and the region become one call
    fwd_desc = type(desc)(regions=desc.regions, forward_src=desc.linear_forward,
                          prologues=desc.prologues)
    init = [f"self._mm = _MM(self.{desc.linear_epilogue}, params)"]
    note = "Template candidate (triton backend): Triton matmul with the pointwise chain fused as its epilogue."
    return assemble(desc=fwd_desc, task_source=task_source, backend="triton", header=header,
                    kernel_defs=kernel, launchers=[launcher], init_lines=init, tunable=tunable,
                    params=params, note=note)
