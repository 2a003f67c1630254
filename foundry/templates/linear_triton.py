"""Template "linear": the fused template (each region a Triton kernel) with every float32
nn.Linear of the forward run by a Triton matmul of its own instead of the library's:
the input (leading dims flattened) times the module's weight, read K-contiguous, plus its
bias, float32 tiles multiplied as dot_precision.F32_DOT says. Its tile parameters are
the LIN_* ones, beside the regions' BLOCK / num_warps / SPLIT."""

from __future__ import annotations

from foundry.templates.dot_precision import dot_precision_tunable
from foundry.templates.matmul_triton import GROUPED_TILES, LINEAR_TILE
from foundry.templates.tiles import fitted_first

# defaults: those of the Linear + epilogue matmul (foundry/templates/matmul_triton.py)
TUNABLE_LINEAR = {"LIN_BLOCK_M": [128, 64, 32, 16], "LIN_BLOCK_N": [128, 64], "LIN_BLOCK_K": [32, 64],
                  "LIN_GROUP_M": [8], "LIN_num_warps": [8, 4], "LIN_num_stages": [3, 4],
                  **dot_precision_tunable("float32")}


def linear_tunable(rows: int) -> dict:
    """TUNABLE_LINEAR for Linears of at most `rows` rows at the traced sizes (0: unknown),
    LIN_BLOCK_M's default the first choice or the smallest covering fewer rows (as the
    matmul template's tiles)."""
    tun = {k: list(v) for k, v in TUNABLE_LINEAR.items()}
    if rows > 0:
        tun["LIN_BLOCK_M"] = fitted_first(rows, tun["LIN_BLOCK_M"])
    return tun

KERNEL = f'''@triton.jit
def _linear(x, wt, bias, out, M, N, K, HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr,
            BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, F32_DOT: tl.constexpr):
    pid = tl.program_id(0)
{GROUPED_TILES}{LINEAR_TILE}    rows = rm.to(tl.int64)[:, None]
    tl.store(out + rows * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))
'''

LAUNCHER = '''class _LINEAR:
    """An nn.Linear's forward on the module's own weight and bias, as the Triton matmul `_linear`."""

    def __init__(self, linear, params):
        self.linear = linear
        self.params = params

    def __call__(self, x):
        w = self.linear.weight.contiguous()
        b = self.linear.bias
        N, K = w.shape
        rows = x.reshape(-1, K).contiguous()
        M = rows.shape[0]
        out = torch.empty((M, N), dtype=torch.float32, device=x.device)
        if out.numel() == 0:
            return out.view(*x.shape[:-1], N)
        p = self.params
        BM, BN = int(p["LIN_BLOCK_M"]), int(p["LIN_BLOCK_N"])
        _linear[(triton.cdiv(M, BM) * triton.cdiv(N, BN),)](
            rows, w, w if b is None else b, out, M, N, K, HAS_BIAS=b is not None, BLOCK_M=BM, BLOCK_N=BN,
            BLOCK_K=int(p["LIN_BLOCK_K"]), GROUP_M=int(p["LIN_GROUP_M"]), F32_DOT=p["F32_DOT"],
            num_warps=int(p["LIN_num_warps"]), num_stages=int(p["LIN_num_stages"]))
        return out.view(*x.shape[:-1], N)
'''


def linear_init_line(index: int, name: str) -> str:
    """The constructor line of `self._lin<index>`, the Triton matmul of the Linear `self.<name>`."""
    return f"self._lin{index} = _LINEAR(self.{name}, params)"
