"""The Triton template for a forward that is only a chain of convolution modules: one
implicit-GEMM Triton kernel per convolution, for 1-, 2- and 3-D (a 1-D or 2-D one is a
3-D one with size-1 leading spatial dims), standard or transposed. A program computes
BLOCK_M output positions (batch and output spatial positions flattened) by BLOCK_N output
channels of one group (the grid's third axis); the sum runs over the group's input
channels times the kernel positions in BLOCK_K steps, gathering the input elements each
output position reads (zero where the padding puts them outside the input), accumulating
in float32 (float32 tiles multiplied as dot_precision.F32_DOT says), the bias added once
at the store. A strided transposed convolution has output phases (position modulo the
stride), each reached by its own kernel taps. By default (ALL_PHASES) a program computes
a run of consecutive outputs of one output row, every phase along W: one product per
phase and W tap, the depth and height taps those of the row's phase, and the phases
interleaved in registers so that the store writes consecutive outputs. (On the H200,
level1/81 in-process: 1.33 ms so, 3.41 ms one phase per program; one product per W tap
over consecutive outputs, the outputs it does not reach masked off, 3.5-9.6 ms.) With
ALL_PHASES off, every output phase runs in one launch, the phase the grid's fastest
index, each summing only its own taps, and a program's outputs lie a stride apart. A
convolution with one input channel per group (depthwise) runs a direct kernel instead:
DW_BLOCK output positions of one (sample, channel) plane per program, a multiply-add per
kernel tap (as an implicit GEMM its tiles would hold one useful column). With TAPS on, a
standard (or stride-1 transposed) convolution with TAPS_MIN_CHANNELS or more input
channels per group runs `_conv_taps`: the kernel taps outermost, and for each tap the
group's input channels in BLOCK_K steps, so the input tile of a step is each output row's
one shifted position plus a channel stride (no per-element tap arithmetic), and the
weight is read from a [groups, taps, channels, output channels] copy. Offsets that can
pass 2^31 elements are int64."""

from __future__ import annotations

import math

from foundry.templates.candidate import assemble
from foundry.templates.dot_precision import F32_DOT_LAUNCH_ARG, dot_precision_arg, dot_precision_tunable
from foundry.templates.ir import Conv, Description
from foundry.templates.tiles import block_for, default_first

# defaults: the fastest on the H200 of a fixed grid of configurations over KernelBench's
# convolutions (benchmarks/product_configs_gpu.py)
TUNABLE_CONV = {"BLOCK_M": [256, 128, 64, 32], "BLOCK_N": [128, 64, 32, 16], "BLOCK_K": [32, 16, 64],
                "num_warps": [8, 4, 2], "num_stages": [3, 2, 4]}


# TAPS (a TUNABLE where some convolution of the chain has this many input channels per
# group, standard or transposed with stride 1): the kernel taps outermost, each tap's
# input channels in BLOCK_K steps (`_conv_taps`), instead of one sum over channels x taps
TAPS_MIN_CHANNELS = 16


def conv_tunable(convs: tuple) -> dict:
    """TUNABLE_CONV for a chain of `convs` at their traced sizes, each default first:
    BLOCK_N and BLOCK_K no larger than the widest group's output channels and longest sum
    need (the launcher also narrows them per convolution, never below 16); with a strided
    transposed convolution, ALL_PHASES (on first), one pipeline stage (first) and BLOCK_N at
    most 32 on 4 warps first, and BLOCK_M 128 first where it is 3-D."""
    tun = {k: list(v) for k, v in TUNABLE_CONV.items()}
    per_group = max(c.out_channels // c.groups for c in convs)
    longest = max((c.in_channels // c.groups) * math.prod(c.kernel) for c in convs)
    tun.update(BLOCK_N=default_first(block_for(per_group, tun["BLOCK_N"]), tun["BLOCK_N"]),
               BLOCK_K=default_first(block_for(longest, tun["BLOCK_K"]), tun["BLOCK_K"]))
    strided_transposed = [c for c in convs if c.transposed and max(c.stride) > 1]
    if strided_transposed:
        # the all-phases kernel (its sums in loops inside the unrolled phases) with one pipeline
        # stage, whose buffers would only cost registers and shared memory; on the H200,
        # in-process at these defaults, one stage against three: level1/72 2.74 vs 6.08 ms,
        # 75 1.44 vs 4.26, 79 1.56 vs 3.14, 81 1.16 vs 1.32
        tun.update(ALL_PHASES=[1, 0], num_stages=default_first(1, tun["num_stages"] + [1]))
        # and BLOCK_N at most 32 on 4 warps: the all-phases tile holds BLOCK_N x every phase,
        # so a narrower one leaves registers for more programs per SM (level1/81 on the H200
        # at BLOCK_M 256: 0.85 ms in-process with BLOCK_N 32 on 4 warps, 1.11-1.22 ms with 64
        # on 8 or 4; judged with 32 on 8 warps, 1.48 ms)
        tun.update(BLOCK_N=default_first(min(32, tun["BLOCK_N"][0]), tun["BLOCK_N"]),
                   num_warps=default_first(4, tun["num_warps"]))
        if any(len(c.kernel) == 3 for c in strided_transposed):
            # and in 3-D, BLOCK_M 128 (the H200, in-process, 4 warps: level1/72 1.72 ms vs
            # 4.25 at 256, level1/77 2.14 vs 5.05; level2/15, 26, 74, 96 and 100's
            # transposed convolutions within 1%; the 1-D and 2-D ones are faster at 256)
            tun.update(BLOCK_M=default_first(128, tun["BLOCK_M"]))
    tun.update(dot_precision_tunable(chain_dtype(convs)))
    if any(taps_apply(c) for c in convs):
        tun["TAPS"] = [0, 1]
    if any(c.in_channels == c.groups for c in convs):
        tun["DW_BLOCK"] = [512, 1024, 256]
    return tun


def taps_apply(conv: Conv) -> bool:
    """Whether TAPS (the kernel taps outermost) changes how `conv` runs: a standard or a
    stride-1 transposed convolution with at least TAPS_MIN_CHANNELS input channels per group."""
    return conv.in_channels // conv.groups >= TAPS_MIN_CHANNELS and (not conv.transposed or max(conv.stride) == 1)


def chain_dtype(convs: tuple) -> str:
    """The chain's one operand dtype name ("mixed" where they differ)."""
    dtypes = {c.dtype for c in convs}
    return dtypes.pop() if len(dtypes) == 1 else "mixed"


def _rows(names: str, sizes: str, block: str = "tl.program_id(0)") -> str:
    """Triton source: a program's output rows `rm` (int64; the `block`-th BLOCK_M of them),
    its output channels `rn` (`co` over all groups) and sum offsets `rk`; each row's sample
    `n` and position (`names`, int32) in a grid of `sizes`; `x_rows`, the row's sample and
    group in the input."""
    d, h, w = names.split()
    sd, sh, sw = sizes.split()
    return f"""    g = tl.program_id(2)
    rm = ({block}).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    m_in = rm < M
    n_in = rn < COUT_G
    {w} = (rm % {sw}).to(tl.int32)
    t = rm // {sw}
    {h} = (t % {sh}).to(tl.int32)
    t = t // {sh}
    {d} = (t % {sd}).to(tl.int32)
    n = t // {sd}
    DHW = D * H * W
    x_rows = x + (n * C_IN + g * CIN_G) * DHW
    co = g * COUT_G + rn
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
"""


# Triton source: the step's input tile `a` (the elements at xd, xh, xw of input channels
# `ci`, zero outside the input) times the weight tile `b` at `pw`
GATHER_AND_DOT = """        inside = (xd >= 0) & (xd < D) & (xh >= 0) & (xh < H) & (xw >= 0) & (xw < W)
        inside = inside & m_in[:, None] & k_in[None, :]
        px = x_rows[:, None] + ci[None, :].to(tl.int64) * DHW + (xd * H + xh) * W + xw
        a = tl.load(px, mask=inside, other=0.0)
        b = tl.load(pw, mask=k_in[:, None] & n_in[None, :], other=0.0)
        acc += tl.dot(a, b@PRECISION@)
"""

# Triton source: the bias added and the tile stored at output positions `sp` of sample `n`
STORE = """    if HAS_BIAS:
        acc += tl.load(bias + co, mask=n_in, other=0.0).to(tl.float32)[None, :]
    po = out + (n * C_OUT * ODHW + sp)[:, None] + co.to(tl.int64)[None, :] * ODHW
    tl.store(po, acc.to(out.dtype.element_ty), mask=m_in[:, None] & n_in[None, :])
"""

# Triton source: the implicit-GEMM kernels' last parameters (kernel size, stride, padding
# and dilation per spatial dim, the bias switch, the tile and the float32 product)
GEOMETRY_AND_TILES = """          KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr, SD: tl.constexpr, SH: tl.constexpr,
          SW: tl.constexpr, PD: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr, DD: tl.constexpr,
          DH: tl.constexpr, DW: tl.constexpr, HAS_BIAS: tl.constexpr,
          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, F32_DOT: tl.constexpr"""

KERNEL = f'''@triton.jit
def _conv(x, w, bias, out, M, C_IN, D, H, W, C_OUT, OD, OH, OW, CIN_G, COUT_G,
{GEOMETRY_AND_TILES}):
{_rows("od oh ow", "OD OH OW")}    KVOL = KD * KH * KW
    K = CIN_G * KVOL
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        k_in = kk < K
        ci = kk // KVOL
        kp = kk % KVOL
        kd = kp // (KH * KW)
        kh = (kp // KW) % KH
        kw = kp % KW
        xd = od[:, None] * SD - PD + kd[None, :] * DD
        xh = oh[:, None] * SH - PH + kh[None, :] * DH
        xw = ow[:, None] * SW - PW + kw[None, :] * DW
        pw = w + co[None, :] * K + kk[:, None]
{GATHER_AND_DOT}    ODHW = OD * OH * OW
    sp = rm - n * ODHW
{STORE}

@triton.jit
def _conv_taps(x, wt, bias, out, M, C_IN, D, H, W, C_OUT, OD, OH, OW, CIN_G, COUT_G,
{GEOMETRY_AND_TILES}, TRANSPOSED: tl.constexpr):
    # the kernel taps outermost, the group's input channels in BLOCK_K steps inside: for
    # one tap every output row reads one input position (its own shift), so a step's input
    # tile is each row's address plus a channel stride, under a mask made once per tap.
    # A stride-1 transposed convolution is a standard one reading position o + P - k * D.
    # `wt`: the weight laid out [groups, taps, CIN_G, COUT_G] (output channels contiguous).
{_rows("od oh ow", "OD OH OW")}    KVOL = KD * KH * KW
    for kd in range(KD):
        for kh in range(KH):
            for kw in range(KW):
                if TRANSPOSED:
                    xd = od + PD - kd * DD
                    xh = oh + PH - kh * DH
                    xw = ow + PW - kw * DW
                else:
                    xd = od * SD - PD + kd * DD
                    xh = oh * SH - PH + kh * DH
                    xw = ow * SW - PW + kw * DW
                inside = m_in & (xd >= 0) & (xd < D) & (xh >= 0) & (xh < H) & (xw >= 0) & (xw < W)
                px = x_rows + (xd * H + xh) * W + xw
                pw = wt + ((g * KVOL + (kd * KH + kh) * KW + kw) * CIN_G).to(tl.int64) * COUT_G + rn[None, :]
                for c0 in range(0, CIN_G, BLOCK_K):
                    ci = c0 + rk
                    k_in = ci < CIN_G
                    a = tl.load(px[:, None] + ci[None, :].to(tl.int64) * DHW, mask=inside[:, None] & k_in[None, :],
                                other=0.0)
                    b = tl.load(pw + ci[:, None] * COUT_G, mask=k_in[:, None] & n_in[None, :], other=0.0)
                    acc += tl.dot(a, b@PRECISION@)
    ODHW = OD * OH * OW
    sp = rm - n * ODHW
{STORE}

@triton.jit
def _phase_row(row):
    # a phase's row of the int32 phase table (see _CONV._phases): its (rd, rh, rw), then the
    # first tap, the tap count and the tap step per dim (its grid size follows at row + 12)
    return (tl.load(row), tl.load(row + 1), tl.load(row + 2), tl.load(row + 3), tl.load(row + 4),
            tl.load(row + 5), tl.load(row + 6), tl.load(row + 7), tl.load(row + 8), tl.load(row + 9),
            tl.load(row + 10), tl.load(row + 11))


@triton.jit
def _conv_transposed(x, w, bias, out, M, C_IN, D, H, W, C_OUT, OD, OH, OW, CIN_G, COUT_G, QD, QH, QW,
                     phases, PHASES,
{GEOMETRY_AND_TILES}):
    # every output phase in one launch, the phase the grid's fastest index, so the programs
    # that store the phases of the same output rows run together. Phase p's row of the
    # int32 table `phases`: (rd, rh, rw), the first tap, tap count and tap step per dim,
    # and its grid size (qd, qh, qw). Its outputs: od = qd * SD + rd (and so for h, w);
    # only the taps kd = kd0 + j * td, j < cd, reach them, each from input
    # qd + (rd + PD - kd * DD) / SD. Rows are positions of the largest phase's grid
    # QD x QH x QW (the same rows in every phase), masked past the phase's own.
    p = tl.program_id(0) % PHASES
    row = phases + p * 15
    RD, RH, RW, KD0, KH0, KW0, CD, CH, CW, TD, TH, TW = _phase_row(row)
{_rows("qd qh qw", "QD QH QW", block="tl.program_id(0) // PHASES")}    m_in = m_in & (qd < tl.load(row + 12)) & (qh < tl.load(row + 13)) & (qw < tl.load(row + 14))
    TAPS = CD * CH * CW
    K = CIN_G * TAPS
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        k_in = kk < K
        ci = kk // TAPS
        j = kk % TAPS
        kd = KD0 + (j // (CH * CW)) * TD
        kh = KH0 + ((j // CW) % CH) * TH
        kw = KW0 + (j % CW) * TW
        # exact divisions: the phase's taps are those whose offset is a multiple of the stride
        xd = qd[:, None] + ((RD + PD - kd * DD) // SD)[None, :]
        xh = qh[:, None] + ((RH + PH - kh * DH) // SH)[None, :]
        xw = qw[:, None] + ((RW + PW - kw * DW) // SW)[None, :]
        tap = (kd * KH + kh) * KW + kw
        pw = w + ((g * CIN_G + ci[:, None]) * COUT_G + rn[None, :]) * (KD * KH * KW) + tap[:, None]
{GATHER_AND_DOT}    ODHW = OD * OH * OW
    if SD * SH * SW == 1:  # one phase, the outputs in order: rows contiguous for the store
        sp = rm - n * ODHW
    else:
        sp = ((qd.to(tl.int64) * SD + RD) * OH + qh * SH + RH) * OW + qw * SW + RW
{STORE}

@triton.jit
def _conv_depthwise(x, w, bias, out, C_IN, D, H, W, C_OUT, OD, OH, OW, MULT,
                    KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr, SD: tl.constexpr,
                    SH: tl.constexpr, SW: tl.constexpr, PD: tl.constexpr, PH: tl.constexpr,
                    PW: tl.constexpr, DD: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr,
                    TRANSPOSED: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK: tl.constexpr):
    # one input channel per group: each output channel co reads input channel co // MULT
    # through its own KD x KH x KW taps, so a program computes BLOCK output positions of
    # one (sample, channel) plane directly, a multiply-add per tap
    nc = tl.program_id(1).to(tl.int64)
    co = nc % C_OUT
    ci = co // MULT
    n = nc // C_OUT
    ODHW = OD * OH * OW
    sp = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    s_in = sp < ODHW
    ow = sp % OW
    t = sp // OW
    oh = t % OH
    od = t // OH
    x_plane = x + (n * C_IN + ci) * (D * H * W)
    w_taps = w + co * (KD * KH * KW)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for kd in tl.static_range(KD):
        for kh in tl.static_range(KH):
            for kw in tl.static_range(KW):
                if TRANSPOSED:
                    td = od + PD - kd * DD
                    th = oh + PH - kh * DH
                    tw = ow + PW - kw * DW
                    xd = td // SD
                    xh = th // SH
                    xw = tw // SW
                    inside = (td >= 0) & (th >= 0) & (tw >= 0) & (td % SD == 0) & (th % SH == 0) & (tw % SW == 0)
                    inside = inside & (xd < D) & (xh < H) & (xw < W)
                else:
                    xd = od * SD - PD + kd * DD
                    xh = oh * SH - PH + kh * DH
                    xw = ow * SW - PW + kw * DW
                    inside = (xd >= 0) & (xd < D) & (xh >= 0) & (xh < H) & (xw >= 0) & (xw < W)
                v = tl.load(x_plane + (xd * H + xh) * W + xw, mask=inside & s_in, other=0.0)
                acc += v.to(tl.float32) * tl.load(w_taps + (kd * KH + kh) * KW + kw).to(tl.float32)
    if HAS_BIAS:
        acc += tl.load(bias + co).to(tl.float32)
    tl.store(out + nc * ODHW + sp, acc.to(out.dtype.element_ty), mask=s_in)


@triton.jit
def _conv_transposed_rows(x, w, bias, out, C_IN, D, H, W, C_OUT, OD, OH, OW, CIN_G, COUT_G, QW, phases,
{GEOMETRY_AND_TILES}, BLOCK_Q: tl.constexpr, SWP: tl.constexpr):
    # BLOCK_Q * SW consecutive outputs ow = qw * SW + rw (qw of this program's BLOCK_Q,
    # every phase rw < SW) of one output row (sample n, depth od, height oh) by BLOCK_N
    # output channels. The row's depth and height taps: those of its phase, from the table
    # row of phase (od % SD, oh % SH, 0) (see _conv_transposed). Phase rw's W taps are the kw
    # with (rw + PW - kw * DW) a multiple of SW, all known when the kernel is compiled;
    # each reads input columns qw + (rw + PW - kw * DW) // SW. The phases' tiles are
    # interleaved in registers (SWP, the phase count rounded up to a power of two) so that
    # the store writes consecutive outputs.
    blocks = tl.cdiv(QW, BLOCK_Q)
    row = tl.program_id(0).to(tl.int64) // blocks
    oh = (row % OH).to(tl.int32)
    t = row // OH
    od = (t % OD).to(tl.int32)
    n = t // OD
    g = tl.program_id(2)
    rq = (tl.program_id(0) % blocks) * BLOCK_Q + tl.arange(0, BLOCK_Q)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    n_in = rn < COUT_G
    co = g * COUT_G + rn
    rd = od % SD
    rh = oh % SH
    _, _, _, KD0, KH0, _, CD, CH, _, TD, TH, _ = _phase_row(phases + (rd * SH + rh) * SW * 15)
    TAPS = CD * CH
    K = CIN_G * TAPS
    DHW = D * H * W
    x_rows = x + (n * C_IN + g * CIN_G) * DHW
    phase = tl.arange(0, SWP)
    tiles = tl.zeros([BLOCK_Q, SWP, BLOCK_N], dtype=tl.float32)
    for rw in tl.static_range(SW):
        acc = tl.zeros([BLOCK_Q, BLOCK_N], dtype=tl.float32)
        for kw in tl.static_range(KW):
            if (rw + PW - kw * DW) % SW == 0:
                xw = rq + (rw + PW - kw * DW) // SW
                w_in = (xw >= 0) & (xw < W)
                for k0 in range(0, K, BLOCK_K):
                    kk = k0 + rk
                    k_in = kk < K
                    ci = kk // TAPS
                    j = kk % TAPS
                    kd = KD0 + (j // CH) * TD
                    kh = KH0 + (j % CH) * TH
                    # exact divisions: the row's taps are those whose offset is a multiple of the stride
                    xd = od // SD + (rd + PD - kd * DD) // SD
                    xh = oh // SH + (rh + PH - kh * DH) // SH
                    inside = (xd >= 0) & (xd < D) & (xh >= 0) & (xh < H) & k_in
                    px = x_rows + (ci.to(tl.int64) * DHW + (xd * H + xh) * W)[None, :] + xw[:, None]
                    a = tl.load(px, mask=w_in[:, None] & inside[None, :], other=0.0)
                    tap = (kd * KH + kh) * KW + kw
                    pw = w + ((g * CIN_G + ci[:, None]) * COUT_G + rn[None, :]) * (KD * KH * KW) + tap[:, None]
                    b = tl.load(pw, mask=k_in[:, None] & n_in[None, :], other=0.0)
                    acc += tl.dot(a, b@PRECISION@)
        tiles = tl.where((phase == rw)[None, :, None], acc[:, None, :], tiles)
    if HAS_BIAS:
        tiles += tl.load(bias + co, mask=n_in, other=0.0).to(tl.float32)[None, None, :]
    ow = rq[:, None] * SW + phase[None, :]
    s_in = (phase[None, :] < SW) & (ow < OW)
    ODHW = OD * OH * OW
    po = out + (n * C_OUT * ODHW + (od.to(tl.int64) * OH + oh) * OW) + ow[:, :, None] + co.to(tl.int64)[None, None, :] * ODHW
    tl.store(po, tiles.to(out.dtype.element_ty), mask=s_in[:, :, None] & n_in[None, None, :])
'''

LAUNCHER = '''TAPS_MIN_CHANNELS = @TAPS_MIN_CHANNELS@  # TAPS: a group's input channels fill a BLOCK_K of at least 16


def _narrowed(block, size):
    """`block`, or the smallest power of two (at least 16) covering a smaller `size`."""
    return int(min(int(block), max(16, triton.next_power_of_2(int(size)))))


def _phase_taps(r, s, p, d, k):
    """(first, count, step): the taps first + j * step (j < count) of a kernel of k taps
    (dilation d) that reach the outputs at phase r (position modulo the stride s, padding
    p) of a transposed convolution; count 0 where none does."""
    step = next(t for t in range(1, s + 1) if (t * d) % s == 0)
    for first in range(min(step, k)):
        if (r + p - first * d) % s == 0:
            return first, len(range(first, k, step)), step
    return 0, 0, step


class _CONV:
    """One convolution of fixed geometry (stride, padding, dilation, output padding per
    spatial dim, groups) run on the module's own weight and bias; its tile parameters are
    those named `prefix` + BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages, DW_BLOCK."""

    def __init__(self, params, *, dims, transposed, stride, padding, dilation, groups, output_padding, prefix=""):
        self.params = {k[len(prefix):]: v for k, v in params.items() if k.startswith(prefix)}
        self.params.setdefault("F32_DOT", params.get("F32_DOT", "ieee"))
        self.dims = dims
        self.transposed = transposed
        lead = 3 - dims
        self.stride = (1,) * lead + tuple(stride)
        self.padding = (0,) * lead + tuple(padding)
        self.dilation = (1,) * lead + tuple(dilation)
        self.output_padding = (0,) * lead + tuple(output_padding)
        self.groups = groups
        self._phase_tables = {}

    def _phases(self, out_size, kernel, device):
        """(table, q_max, most_taps) of a transposed convolution to `out_size`, made once per
        size on `device` (a copy from the host on every call would wait for the GPU):
        `table`, an int32 row per output phase of (rd, rh, rw, first tap, tap count and tap
        step per dim, the phase's grid size per dim); `q_max`, the largest phase's grid size
        per dim; `most_taps`, the most taps any phase sums."""
        key = (out_size, kernel, str(device))
        if key not in self._phase_tables:
            rows = []
            q_max = [-(-o // s) for o, s in zip(out_size, self.stride)]
            sd, sh, sw = self.stride
            for phase in [(a, c, e) for a in range(sd) for c in range(sh) for e in range(sw)]:
                q = [max(0, (o - r + s - 1) // s) for o, r, s in zip(out_size, phase, self.stride)]
                taps = [_phase_taps(r, s, pad, d, k) for r, s, pad, d, k in
                        zip(phase, self.stride, self.padding, self.dilation, kernel)]
                rows.append([*phase, *(t[0] for t in taps), *(t[1] for t in taps), *(t[2] for t in taps), *q])
            self._phase_tables[key] = (torch.tensor(rows, dtype=torch.int32, device=device), q_max,
                                       max(_prod(r[6:9]) for r in rows))
        return self._phase_tables[key]

    def __call__(self, x, weight, bias):
        x = x.contiguous()
        weight = weight.contiguous()
        lead = 3 - self.dims
        N, C_in = x.shape[0], x.shape[1]
        size = (1,) * lead + tuple(x.shape[2:])
        kernel = (1,) * lead + tuple(weight.shape[2:])
        if self.transposed:
            C_out = weight.shape[1] * self.groups
            out_size = tuple((i - 1) * s - 2 * p + d * (k - 1) + op + 1 for i, s, p, d, k, op in
                             zip(size, self.stride, self.padding, self.dilation, kernel, self.output_padding))
        else:
            C_out = weight.shape[0]
            out_size = tuple((i + 2 * p - d * (k - 1) - 1) // s + 1 for i, s, p, d, k in
                             zip(size, self.stride, self.padding, self.dilation, kernel))
        out = torch.empty((N, C_out, *out_size[lead:]), dtype=x.dtype, device=x.device)
        if out.numel() == 0:
            return out
        cin_g, cout_g = C_in // self.groups, C_out // self.groups
        p = self.params
        b = weight if bias is None else bias  # (a pointer the kernel never reads without HAS_BIAS)
        if cin_g == 1:
            grid = (triton.cdiv(_prod(out_size), int(p["DW_BLOCK"])), N * C_out)
            _conv_depthwise[grid](x, weight, b, out, C_in, *size, C_out, *out_size,
                                  cout_g, *kernel, *self.stride, *self.padding, *self.dilation,
                                  TRANSPOSED=self.transposed, HAS_BIAS=bias is not None,
                                  BLOCK=int(p["DW_BLOCK"]), num_warps=4)
            return out
        BM = int(p["BLOCK_M"])
        BN = _narrowed(p["BLOCK_N"], cout_g)
        geometry = (*kernel, *self.stride, *self.padding, *self.dilation)
        meta = dict(HAS_BIAS=bias is not None, BLOCK_M=BM, BLOCK_N=BN, @F32_DOT_LAUNCH_ARG@,
                    num_warps=int(p["num_warps"]), num_stages=int(p["num_stages"]))
        if (bool(int(p.get("TAPS", 0))) and cin_g >= TAPS_MIN_CHANNELS
                and (not self.transposed or _prod(self.stride) == 1)):
            # the taps outermost: the weight as [groups, taps, CIN_G, COUT_G]
            taps = _prod(kernel)
            if self.transposed:  # [C_in, COUT_G, taps] = [groups, CIN_G, COUT_G, taps]
                wt = weight.reshape(self.groups, cin_g, cout_g, taps).permute(0, 3, 1, 2).contiguous()
            else:  # [C_out, CIN_G, taps] = [groups, COUT_G, CIN_G, taps]
                wt = weight.reshape(self.groups, cout_g, cin_g, taps).permute(0, 3, 2, 1).contiguous()
            M = N * _prod(out_size)
            grid = (triton.cdiv(M, BM), triton.cdiv(cout_g, BN), self.groups)
            _conv_taps[grid](x, wt, b, out, M, C_in, *size, C_out, *out_size, cin_g, cout_g, *geometry,
                             BLOCK_K=_narrowed(p["BLOCK_K"], cin_g), TRANSPOSED=self.transposed, **meta)
            return out
        if not self.transposed:
            M = N * _prod(out_size)
            grid = (triton.cdiv(M, BM), triton.cdiv(cout_g, BN), self.groups)
            _conv[grid](x, weight, b, out, M, C_in, *size, C_out, *out_size, cin_g, cout_g, *geometry,
                        BLOCK_K=_narrowed(p["BLOCK_K"], cin_g * _prod(kernel)), **meta)
            return out
        table, q_max, most_taps = self._phases(tuple(out_size), kernel, x.device)
        block_k = _narrowed(p["BLOCK_K"], cin_g * most_taps)
        if _prod(self.stride) > 1 and bool(int(p.get("ALL_PHASES", 1))):
            # BLOCK_Q * SW consecutive outputs of one output row per program, every W phase;
            # BLOCK_Q from BLOCK_M (at least 16, a product's smallest side)
            phases_w = max(2, triton.next_power_of_2(self.stride[2]))
            block_q = max(16, BM // phases_w)
            grid = (N * out_size[0] * out_size[1] * triton.cdiv(q_max[2], block_q), triton.cdiv(cout_g, BN), self.groups)
            _conv_transposed_rows[grid](x, weight, b, out, C_in, *size, C_out, *out_size, cin_g, cout_g, q_max[2],
                                        table, *geometry, BLOCK_K=block_k, BLOCK_Q=block_q, SWP=phases_w, **meta)
            return out
        # every output phase in one launch, each phase summing only the kernel taps that reach it
        M = N * _prod(q_max)
        grid = (table.shape[0] * triton.cdiv(M, BM), triton.cdiv(cout_g, BN), self.groups)
        _conv_transposed[grid](x, weight, b, out, M, C_in, *size, C_out, *out_size, cin_g, cout_g, *q_max,
                               table, table.shape[0], *geometry, BLOCK_K=block_k, **meta)
        return out
'''


def conv_init_line(index: int, conv: Conv, prefix: str = "") -> str:
    """The constructor line of `self._conv<index>`, reading its tile parameters under
    `prefix`. The group count is read from the module when the candidate is built: a
    depthwise convolution's is its channel count, which the judge's small sizes change."""
    extra = f", prefix={prefix!r}" if prefix else ""
    return (f"self._conv{index} = _CONV(params, dims={conv.dims}, transposed={conv.transposed}, "
            f"stride={conv.stride!r}, padding={conv.padding!r}, dilation={conv.dilation!r}, "
            f"groups={conv.module}.groups, output_padding={conv.output_padding!r}{extra})")


def conv_sources(convs: tuple) -> tuple[str, str]:
    """(kernel definitions, launcher source) of the convolution kernels for `convs`."""
    return (KERNEL.replace("@PRECISION@", dot_precision_arg(chain_dtype(convs))),
            LAUNCHER.replace("@F32_DOT_LAUNCH_ARG@", F32_DOT_LAUNCH_ARG).replace("@TAPS_MIN_CHANNELS@",
                                                                                str(TAPS_MIN_CHANNELS)))



def emit_convs(*, desc: Description, task_source: str, tunable: dict, params: dict, header: str) -> str:
    kernel, launcher = conv_sources(desc.convs)
    note = ("Template candidate (triton backend): each convolution as one implicit-GEMM Triton kernel "
            "(a depthwise one as a direct kernel) on the module's own weight and bias.")
    return assemble(desc=desc, task_source=task_source, backend="triton", header=header,
                    kernel_defs=kernel, launchers=[launcher],
                    init_lines=[conv_init_line(i, c) for i, c in enumerate(desc.convs)],
                    tunable=tunable, params=params, note=note)
