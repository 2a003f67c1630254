"""The Triton kernels of the convolution template (conv_triton.py launches them): the
implicit-GEMM `_conv` (the sum over channels x taps in BLOCK_K steps, each input element
gathered), `_conv_taps` (the kernel taps outermost, each tap's channels in BLOCK_K steps; with CL
on channels-last operands),
`_conv_outer` (few input channels per group: the sum as outer products of the rows' input
values and the output channels' weights, a multiply-add each, per channel and tap),
`_conv_transposed` (every output phase of a transposed convolution in one launch),
`_conv_transposed_rows` (a run of consecutive outputs of one output row, every W phase)
and `_conv_depthwise` (one input channel per group: a multiply-add per tap; by tiles of
an output plane in `_conv_depthwise_tiles`). `KERNELS`
is their source, with `@PRECISION@` where a float32 product's precision goes."""

from __future__ import annotations


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

# Triton source: the loops over the kernel taps of `_conv_taps` and `_conv_outer`, and in
# them the tap's input position per output row (`px`, zero where `inside` is false; input
# positions X_PS elements apart) and its weights' row for the group's first input channel
# (`pw`, output channels W_NS elements apart, in a [groups, taps, ...] layout whose tap
# blocks hold CIN_G x COUT_G weights); a stride-1 transposed convolution is a standard one
# reading position o + P - k * D
TAPS_OUTERMOST = """    KVOL = KD * KH * KW
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
                px = x_rows + ((xd * H + xh) * W + xw).to(tl.int64) * X_PS
                pw = wt + ((g * KVOL + (kd * KH + kh) * KW + kw) * CIN_G).to(tl.int64) * COUT_G + rn * W_NS
"""

# Triton source: the implicit-GEMM kernels' last parameters (kernel size, stride, padding
# and dilation per spatial dim, the bias switch, the tile and the float32 product)
GEOMETRY_AND_TILES = """          KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr, SD: tl.constexpr, SH: tl.constexpr,
          SW: tl.constexpr, PD: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr, DD: tl.constexpr,
          DH: tl.constexpr, DW: tl.constexpr, HAS_BIAS: tl.constexpr,
          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, F32_DOT: tl.constexpr"""

KERNELS = f'''@triton.jit
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
{GEOMETRY_AND_TILES}, TRANSPOSED: tl.constexpr, CL: tl.constexpr):
    # the kernel taps outermost, the group's input channels in BLOCK_K steps inside: for
    # one tap every output row reads one input position (its own shift), so a step's input
    # tile is each row's address plus a channel stride, under a mask made once per tap.
    # A stride-1 transposed convolution is a standard one reading position o + P - k * D.
    # `wt`: the weight laid out [groups, taps, CIN_G, COUT_G] (output channels contiguous);
    # with CL, `x` is channels-last ([N, D, H, W, C_IN]) and `wt` [groups, taps, COUT_G,
    # CIN_G], so both tiles of a product are contiguous along its sum (the channels).
{_rows("od oh ow", "OD OH OW")}    if CL:
        x_rows = x + n * DHW * C_IN + g * CIN_G
        X_PS = C_IN
        X_CS = 1
        W_NS = CIN_G
        W_KS = 1
    else:
        X_PS = 1
        X_CS = DHW
        W_NS = 1
        W_KS = COUT_G
{TAPS_OUTERMOST}                for c0 in range(0, CIN_G, BLOCK_K):
                    ci = c0 + rk
                    k_in = ci < CIN_G
                    a = tl.load(px[:, None] + ci[None, :].to(tl.int64) * X_CS, mask=inside[:, None] & k_in[None, :],
                                other=0.0)
                    b = tl.load(pw[None, :] + ci[:, None] * W_KS, mask=k_in[:, None] & n_in[None, :], other=0.0)
                    acc += tl.dot(a, b@PRECISION@)
    ODHW = OD * OH * OW
    sp = rm - n * ODHW
{STORE}

@triton.jit
def _conv_outer(x, wt, bias, out, M, C_IN, D, H, W, C_OUT, OD, OH, OW, CIN_G, COUT_G,
{GEOMETRY_AND_TILES}, TRANSPOSED: tl.constexpr):
    # few input channels per group (a first layer's 3): for each tap and each input channel,
    # the rows' input values (one position per row, its address made once per tap) times
    # the output channels' weights, an outer product of float32 multiply-adds. As a product
    # (`_conv`) the K side would be a handful of channels x taps, each element's gather
    # costing more index arithmetic than its products. `wt`: the weight laid out [groups,
    # taps, CIN_G, COUT_G], as `_conv_taps` reads it.
{_rows("od oh ow", "OD OH OW")}    X_PS = 1
    W_NS = 1
{TAPS_OUTERMOST}                for ci in range(CIN_G):
                    a = tl.load(px, mask=inside, other=0.0).to(tl.float32)
                    b = tl.load(pw, mask=n_in, other=0.0).to(tl.float32)
                    acc += a[:, None] * b[None, :]
                    px += DHW
                    pw += COUT_G
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
def _tap_source(o, k, P, DL, S, size, TRANSPOSED: tl.constexpr):
    """(input index, in range) that output positions `o` read at tap `k` along one dim
    (padding P, dilation DL, stride S, input `size`); a transposed convolution's output
    reads only the inputs its stride lands on."""
    if TRANSPOSED:
        t = o + P - k * DL
        xi = t // S
        return xi, (t >= 0) & (t % S == 0) & (xi < size)
    xi = o * S - P + k * DL
    return xi, (xi >= 0) & (xi < size)


@triton.jit
def _conv_depthwise_tiles(x, w, bias, out, C_IN, D, H, W, C_OUT, OD, OH, OW, MULT,
                          KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr, SD: tl.constexpr,
                          SH: tl.constexpr, SW: tl.constexpr, PD: tl.constexpr, PH: tl.constexpr,
                          PW: tl.constexpr, DD: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr,
                          TRANSPOSED: tl.constexpr, HAS_BIAS: tl.constexpr, TILE_H: tl.constexpr,
                          TILE_W: tl.constexpr):
    # one input channel per group, as _conv_depthwise, but a program computes a TILE_H x
    # TILE_W tile of one output plane (sample, channel, depth): each tap's input rows and
    # columns are vectors, so a tap costs a load and a multiply-add per output, its mask
    # the outer product of a row mask and a column mask
    tiles_w = tl.cdiv(OW, TILE_W)
    tiles = tl.cdiv(OH, TILE_H) * tiles_w
    pid = tl.program_id(0).to(tl.int64)
    plane = pid // tiles  # (n * C_OUT + co) * OD + od
    tile = (pid % tiles).to(tl.int32)
    od = (plane % OD).to(tl.int32)
    nc = plane // OD
    co = nc % C_OUT
    ci = co // MULT
    n = nc // C_OUT
    oh = (tile // tiles_w) * TILE_H + tl.arange(0, TILE_H)
    ow = (tile % tiles_w) * TILE_W + tl.arange(0, TILE_W)
    out_in = (oh < OH)[:, None] & (ow < OW)[None, :]
    x_plane = x + (n * C_IN + ci) * (D * H * W)
    w_taps = w + co * (KD * KH * KW)
    acc = tl.zeros([TILE_H, TILE_W], dtype=tl.float32)
    depth = oh * 0 + od  # the plane's depth, as a row vector (a scalar mask does not broadcast everywhere)
    for kd in tl.static_range(KD):
        xd, d_in = _tap_source(depth, kd, PD, DD, SD, D, TRANSPOSED)
        for kh in tl.static_range(KH):
            xh, h_in = _tap_source(oh, kh, PH, DH, SH, H, TRANSPOSED)
            for kw in tl.static_range(KW):
                xw, w_in = _tap_source(ow, kw, PW, DW, SW, W, TRANSPOSED)
                inside = ((d_in & h_in)[:, None] & w_in[None, :]) & out_in
                v = tl.load(x_plane + (xd * H + xh)[:, None] * W + xw[None, :], mask=inside, other=0.0)
                acc += v.to(tl.float32) * tl.load(w_taps + (kd * KH + kh) * KW + kw).to(tl.float32)
    if HAS_BIAS:
        acc += tl.load(bias + co).to(tl.float32)
    po = out + plane * (OH * OW) + oh[:, None] * OW + ow[None, :]
    tl.store(po, acc.to(out.dtype.element_ty), mask=out_in)


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
