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
kernel tap (as an implicit GEMM its tiles would hold one useful column); with DW_TILE on,
a 2-D tile of an output plane per program, each tap's input rows and columns vectors (no
per-output index arithmetic). With TAPS on, a
standard (or stride-1 transposed) convolution with TAPS_MIN_CHANNELS or more input
channels per group runs `_conv_taps`: the kernel taps outermost, and for each tap the
group's input channels in BLOCK_K steps, so the input tile of a step is each output row's
one shifted position plus a channel stride (no per-element tap arithmetic), and the
weight is read from a [groups, taps, channels, output channels] copy; with CHANNELS_LAST
on as well, the input is copied channels-last first (layout_copy_triton) and the weight
is [groups, taps, output channels, channels], both product tiles contiguous along the
channels they sum over. With OUTER on
(first where a convolution has at most OUTER_FIRST_CHANNELS input channels per group),
one with 2 to TAPS_MIN_CHANNELS - 1 of them (a first layer's 3) runs `_conv_outer`: the
taps outermost as in `_conv_taps`, and per tap and input channel the rows' input values
times the output channels' weights as an outer product of float32 multiply-adds, no
product unit. Offsets that can pass 2^31 elements are int64."""

from __future__ import annotations

import math

from foundry.templates.candidate import assemble
from foundry.templates.conv_kernels_triton import KERNELS
from foundry.templates.dot_precision import F32_DOT_LAUNCH_ARG, dot_precision_arg, dot_precision_tunable
from foundry.templates.ir import Conv, Description
from foundry.templates.layout_copy_triton import KERNEL as COPY_KERNEL
from foundry.templates.layout_copy_triton import LAUNCHER as COPY_LAUNCHER
from foundry.templates.tiles import block_for, default_first

# defaults: the fastest on the H200 of a fixed grid of configurations over KernelBench's
# convolutions (benchmarks/product_configs_gpu.py)
TUNABLE_CONV = {"BLOCK_M": [256, 128, 64, 32], "BLOCK_N": [128, 64, 32, 16], "BLOCK_K": [32, 16, 64],
                "num_warps": [8, 4, 2], "num_stages": [3, 2, 4]}


# TAPS (a TUNABLE where some convolution of the chain has this many input channels per
# group, standard or transposed with stride 1): the kernel taps outermost, each tap's
# input channels in BLOCK_K steps (`_conv_taps`), instead of one sum over channels x taps
TAPS_MIN_CHANNELS = 16

# OUTER (a TUNABLE where some convolution has 2 to TAPS_MIN_CHANNELS - 1 input channels per
# group): on first where each has at most this many
OUTER_FIRST_CHANNELS = 4


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
    outer = [c for c in convs if outer_applies(c)]
    if outer:
        # on first where every convolution it changes has at most OUTER_FIRST_CHANNELS input
        # channels per group (a first layer's RGB): its few channels times its taps make a
        # product's K side of a few dozen, each element gathered with more index arithmetic
        # than it has products (on an H100, judged, level1/54 and 59, 3-D convolutions of 3
        # channels, ran at 0.49x and 0.66x of cuDNN that way, at 0.20-0.22 of their floor);
        # off first above that, where the products' tensor cores may win (not yet timed)
        few = all(c.in_channels // c.groups <= OUTER_FIRST_CHANNELS for c in outer)
        tun["OUTER"] = [1, 0] if few else [0, 1]
    taps = [c for c in convs if taps_apply(c)]
    if taps:
        # on first where every convolution it changes is transposed (an H100, in-process, the
        # chain's other defaults: level1/57 15.9 vs 66.9 ms, 64 15.5 vs 44.0, 65 9.1 vs 35.7,
        # 69 18.8 vs 62.5, 70 48.0 vs 95.9, 74 3.3 vs 11.4); off first for standard ones
        # (level1/55 23.1 vs 19.6 ms, 67 9.1 vs 6.5)
        tun["TAPS"] = [1, 0] if all(c.transposed for c in taps) else [0, 1]
        # with TAPS on, the input copied channels-last and the weight input-channels-contiguous,
        # so both tiles of a float32 product are contiguous along its sum, as Hopper's float32
        # tensor-core product reads them (the square matmul level1/1 went from 0.40-0.43x to
        # 1.49x of torch.compile on the H200 when its B was copied so); on first for float32
        # (not yet timed on a convolution), off first for 16-bit operands
        tun["CHANNELS_LAST"] = [1, 0] if chain_dtype(convs) == "float32" else [0, 1]
    if any(c.in_channels == c.groups for c in convs):
        tun["DW_BLOCK"] = [512, 1024, 256]
        # off first: on an H100, in-process, within 6% either way (level1/82 1.61 vs 1.64 ms,
        # 84 5.94 vs 6.26, 85 1.70 vs 1.59)
        tun["DW_TILE"] = [0, 1]
    return tun


def taps_apply(conv: Conv) -> bool:
    """Whether TAPS (the kernel taps outermost) changes how `conv` runs: a standard or a
    stride-1 transposed convolution with at least TAPS_MIN_CHANNELS input channels per group."""
    return conv.in_channels // conv.groups >= TAPS_MIN_CHANNELS and (not conv.transposed or max(conv.stride) == 1)


def outer_applies(conv: Conv) -> bool:
    """Whether OUTER (the sum as outer products of input values and weights) changes how
    `conv` runs: a standard (or stride-1 transposed) convolution with 2 to
    TAPS_MIN_CHANNELS - 1 input channels per group (one is the depthwise kernel's)."""
    per_group = conv.in_channels // conv.groups
    return 1 < per_group < TAPS_MIN_CHANNELS and (not conv.transposed or max(conv.stride) == 1)


def chain_dtype(convs: tuple) -> str:
    """The chain's one operand dtype name ("mixed" where they differ)."""
    dtypes = {c.dtype for c in convs}
    return dtypes.pop() if len(dtypes) == 1 else "mixed"


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

    def _taps_major(self, weight, cin_g, cout_g, taps, channels_last=False):
        """The weight laid out [groups, taps, CIN_G, COUT_G] (a tap's channels' weights
        together, output channels contiguous) or, `channels_last`, [groups, taps, COUT_G,
        CIN_G] (input channels contiguous), from [C_out, CIN_G, *kernel] or, transposed,
        [C_in, COUT_G, *kernel]."""
        if self.transposed:  # [C_in, COUT_G, taps] = [groups, CIN_G, COUT_G, taps]
            order = (0, 3, 2, 1) if channels_last else (0, 3, 1, 2)
            return weight.reshape(self.groups, cin_g, cout_g, taps).permute(*order).contiguous()
        # [C_out, CIN_G, taps] = [groups, COUT_G, CIN_G, taps]
        order = (0, 3, 1, 2) if channels_last else (0, 3, 2, 1)
        return weight.reshape(self.groups, cout_g, cin_g, taps).permute(*order).contiguous()

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
        if cin_g == 1 and bool(int(p.get("DW_TILE", 0))):
            # tiles of an output plane: up to 128 outputs wide, about 1024 in all
            tile_w = min(128, max(16, triton.next_power_of_2(out_size[2])))
            tile_h = min(triton.next_power_of_2(out_size[1]), max(1, 1024 // tile_w))
            tiles = triton.cdiv(out_size[1], tile_h) * triton.cdiv(out_size[2], tile_w)
            _conv_depthwise_tiles[(N * C_out * out_size[0] * tiles,)](
                x, weight, b, out, C_in, *size, C_out, *out_size, cout_g, *kernel, *self.stride, *self.padding,
                *self.dilation, TRANSPOSED=self.transposed, HAS_BIAS=bias is not None, TILE_H=tile_h,
                TILE_W=tile_w, num_warps=4)
            return out
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
        stride_one = not self.transposed or _prod(self.stride) == 1
        taps = bool(int(p.get("TAPS", 0))) and cin_g >= TAPS_MIN_CHANNELS and stride_one
        outer = bool(int(p.get("OUTER", 0))) and cin_g < TAPS_MIN_CHANNELS and stride_one
        if taps or outer:
            # the taps outermost: the weight as [groups, taps, CIN_G, COUT_G]; with CHANNELS_LAST
            # (taps only) the input copied channels-last and the weight [groups, taps, COUT_G, CIN_G]
            channels_last = taps and bool(int(p.get("CHANNELS_LAST", 0)))
            wt = self._taps_major(weight, cin_g, cout_g, _prod(kernel), channels_last)
            M = N * _prod(out_size)
            grid = (triton.cdiv(M, BM), triton.cdiv(cout_g, BN), self.groups)
            xs = _with_contiguous_dim(x.reshape(N, C_in, _prod(size)), -2) if channels_last else x
            launch, layout = (_conv_taps, dict(CL=channels_last)) if taps else (_conv_outer, {})
            launch[grid](xs, wt, b, out, M, C_in, *size, C_out, *out_size, cin_g, cout_g, *geometry,
                         BLOCK_K=_narrowed(p["BLOCK_K"], cin_g), TRANSPOSED=self.transposed, **layout, **meta)
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
    """(kernel definitions, launcher source) of the convolution kernels for `convs` (the
    layout copy of CHANNELS_LAST among them)."""
    launcher = LAUNCHER.replace("@F32_DOT_LAUNCH_ARG@", F32_DOT_LAUNCH_ARG)
    launcher = launcher.replace("@TAPS_MIN_CHANNELS@", str(TAPS_MIN_CHANNELS))
    return (KERNELS.replace("@PRECISION@", dot_precision_arg(chain_dtype(convs))) + "\n\n" + COPY_KERNEL,
            COPY_LAUNCHER + "\n\n" + launcher)



def emit_convs(*, desc: Description, task_source: str, tunable: dict, params: dict, header: str) -> str:
    kernel, launcher = conv_sources(desc.convs)
    note = ("Template candidate (triton backend): each convolution as one implicit-GEMM Triton kernel "
            "(a depthwise one as a direct kernel) on the module's own weight and bias.")
    return assemble(desc=desc, task_source=task_source, backend="triton", header=header,
                    kernel_defs=kernel, launchers=[launcher],
                    init_lines=[conv_init_line(i, c) for i, c in enumerate(desc.convs)],
                    tunable=tunable, params=params, note=note)
