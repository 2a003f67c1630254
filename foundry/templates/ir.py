"""The backend-neutral description of a fused computation.

A task's forward is read into a graph; runs of fusable nodes become `Region`s. A region
is one kernel: a pointwise `pre` phase on the input shape, an optional `RowOp`
(reduction, softmax, norm or scan over a contiguous range of dims, or 1-3-D pooling), and
a pointwise `post` phase on the row op's output shape. Everything else (matmul,
convolution, views) stays a torch call in the candidate's forward. Emitters for each backend
turn a region into kernel source; each op is written once per backend. A forward that is
exactly one matrix product of two of its inputs is described by a `Gemm` instead, and one
that is only a chain of convolution modules by a tuple of `Conv`s.
"""

from __future__ import annotations

from dataclasses import dataclass

FLOAT = "float32"  # what every template computes in
# the float dtypes a region may read and write (a 16-bit one is loaded into float32, computed
# there and rounded once when stored)
FLOATS = ("float32", "bfloat16", "float16")
FLOAT_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}  # an element's size, per name in FLOATS


@dataclass(frozen=True)
class Ref:
    """An argument of a pointwise instruction.

    kind: "val" (result of instruction `index` of the same phase), "in" (tensor operand
    `index` of the phase), "row" (the row op's result, post phase only), "const" (`value`).
    """

    kind: str
    index: int = 0
    value: float = 0.0


@dataclass(frozen=True)
class Instr:
    """One pointwise op; `attrs` are the op's scalar settings as (name, value) pairs."""

    op: str
    args: tuple
    attrs: tuple = ()

    def attr(self, name: str, default=None):
        for k, v in self.attrs:
            if k == name:
                return v
        return default


@dataclass(frozen=True)
class Operand:
    """A tensor read by a phase, broadcast to the phase's shape S viewed as [R, K] with
    R = prod(S[:split]), K = prod(S[split:]).

    `row_from`: the operand varies over dims [row_from, split) (None: over none of them);
    `col`: it varies over all of S[split:] (else over none). A full-shape operand has
    row_from=0 and col=True; a per-channel bias (C,1,1) on (N,C,H,W) with split=2 has
    row_from=1, col=False; a scalar tensor has row_from=None, col=False.
    """

    name: str  # the variable that holds it in the generated forward
    dtype: str = FLOAT
    row_from: int | None = 0
    col: bool = True

    @property
    def layout(self) -> str:
        if self.row_from is None:
            return "col" if self.col else "scalar"
        if self.row_from == 0 and self.col:
            return "full"
        return "rowcol" if self.col else "row"


@dataclass(frozen=True)
class Phase:
    """A pointwise computation over one shape; the result is `result`."""

    rank: int
    split: int
    operands: tuple  # of Operand
    body: tuple  # of Instr
    result: Ref


@dataclass(frozen=True)
class PoolWindow:
    """A max/avg pooling window over the last `len(kernel)` dims (1 to 3) of an
    (N, C, *spatial) input, per dim: extent, stride, padding (at most half the extent) and
    dilation (1 for avg); floor mode. `count_include_pad`: an avg divides by the whole
    window, else by the part of it inside the input."""

    kernel: tuple
    stride: tuple
    padding: tuple
    dilation: tuple
    count_include_pad: bool = True

    @property
    def dims(self) -> int:
        return len(self.kernel)

    def as_3d(self) -> tuple:
        """(kernel, stride, padding, dilation), each as (depth, height, width): a 1-D or
        2-D window is a 3-D one of extent 1 (stride and dilation 1, no padding) in the
        missing leading dims."""
        missing = 3 - self.dims
        return ((1,) * missing + tuple(self.kernel), (1,) * missing + tuple(self.stride),
                (0,) * missing + tuple(self.padding), (1,) * missing + tuple(self.dilation))


@dataclass(frozen=True)
class RowOp:
    """A row operation over dims [dim_start, dim_end) of its input (viewed as
    [outer, L, inner]).

    family: "reduce" (kind: sum mean max min argmax argmin logsumexp prod norm_l1
    norm_l2), "softmax" (softmax, log_softmax), "norm" (layer rms group instance),
    "scan" (cumsum cumprod; `reverse`, `exclusive`), "pool" (max avg: a 1-, 2- or 3-D
    `window` over the dims after the channel dim of an (N, C, *spatial) input).
    "loss" (cross_entropy: per row of an (N, C) input, logsumexp of the row less its
    element at the row's class, read from the int64 `index` tensor; a row whose class is
    `ignore_index` gives 0; `reduction` "none" gives one value per row, "sum" their sum,
    "mean" their sum over the rows not ignored).
    `weight`/`bias`: forward variable names of affine parameters (norms); for "layer" and
    "rms" indexed by the position within the row, for "group"/"instance" by channel.
    `groups`: GroupNorm's group count at the traced sizes; `groups_module`: the dotted path
    of its module, whose `num_groups` the candidate reads when it is built (a model built
    with other init inputs, as at the judge's small sizes, may have another count).
    """

    family: str
    kind: str
    dim_start: int
    dim_end: int
    keepdim: bool = True
    reverse: bool = False
    exclusive: bool = False
    eps: float = 1e-5
    groups: int = 1
    groups_module: str | None = None
    weight: str | None = None
    bias: str | None = None
    out_dtype: str = FLOAT
    window: PoolWindow | None = None
    index: str | None = None  # loss: the forward variable holding each row's class
    ignore_index: int = -100
    reduction: str = "none"

    @property
    def reduces(self) -> bool:
        return self.family == "reduce"


@dataclass(frozen=True)
class Region:
    """One fused kernel. `anchor`: index of the pre-phase operand whose shape is the
    region's input shape. `inputs`: the forward variables passed to the kernel, in order:
    pre operands, then post operands, then the row op's weight, bias and index."""

    name: str
    pre: Phase
    row: RowOp | None
    post: Phase | None
    anchor: int
    out_rank: int
    out_dtype: str = FLOAT

    @property
    def inputs(self) -> tuple:
        names = [o.name for o in self.pre.operands]
        if self.post is not None:
            names += [o.name for o in self.post.operands]
        if self.row is not None:
            names += [n for n in (self.row.weight, self.row.bias, self.row.index) if n]
        return tuple(names)

    @property
    def family(self) -> str:
        return self.row.family if self.row is not None else "pointwise"


@dataclass(frozen=True)
class Prologue:
    """A torch call kept on the vendor library (cuBLAS/cuDNN/ATen) before a region."""

    kind: str  # "linear", "conv", "matmul", "other"
    target: str  # module attribute or function name
    rows: int = 0  # a Linear's rows at the traced sizes (its output's leading dims flattened); 0: unknown


@dataclass(frozen=True)
class Gemm:
    """A forward that is exactly one matrix product `op(a) @ op(b)` of two of its inputs,
    `op` a swap of the last two dims (`trans_a`, `trans_b`) or none: 2-D x 2-D, or batched
    with a 3-D operand (a 2-D operand, or a batch of one, is shared by every batch).

    `a`, `b`: the forward expressions holding the inputs; `dtype`: theirs and the
    output's (the product accumulates in float32); `batch`, `m`, `n`, `k`: the sizes at
    the traced shapes, which choose default parameters (kernels read sizes at run time).
    """

    a: str
    b: str
    trans_a: bool = False
    trans_b: bool = False
    dtype: str = FLOAT
    batch: int = 1
    m: int = 1
    n: int = 1
    k: int = 1


@dataclass(frozen=True)
class Conv:
    """One convolution module call (nn.Conv1d/2d/3d or nn.ConvTranspose1d/2d/3d, zero
    padding) in a forward that is only a chain of them.

    `module`: the forward expression of the module (e.g. `self.conv`); `dims`: 1, 2 or 3
    spatial dims; per spatial dim: `kernel`, `stride`, `padding`, `dilation`,
    `output_padding` (transposed only); `dtype`: the input's, weight's and output's (the
    sums accumulate in float32); `in_shape`, `out_shape`: at the traced sizes, which choose
    default parameters (kernels read sizes at run time).
    """

    module: str
    dims: int
    transposed: bool
    in_channels: int
    out_channels: int
    kernel: tuple
    stride: tuple
    padding: tuple
    dilation: tuple
    groups: int = 1
    output_padding: tuple = ()
    has_bias: bool = True
    dtype: str = FLOAT
    in_shape: tuple = ()
    out_shape: tuple = ()


@dataclass(frozen=True)
class Description:
    """A task's forward as torch calls plus fused regions.

    `forward_src`: the body of `forward` (a def), calling region kernels as
    `self._k<i>(...)`. `linear_epilogue`: when the forward is exactly one nn.Linear
    followed by one pointwise region, the module attribute of that Linear (the Triton
    matmul-with-epilogue template applies). `gemm`: when the forward is exactly one
    matrix product of two inputs, that product (no regions; the Triton matrix-product
    template applies). `convs`: when the forward is only a chain of convolution modules,
    each applied to the previous one's output, those convolutions in order (no regions;
    the Triton convolution template applies). `prologue_convs`: when the forward has
    regions, the convolution modules it calls before them (one per module, in call
    order), where the Triton convolution kernels take every one (template "conv").
    """

    regions: tuple  # of Region
    forward_src: str
    prologues: tuple = ()  # of Prologue
    linear_epilogue: str | None = None
    linear_region: int | None = None
    linear_forward: str | None = None  # forward calling `self._mm(x, ...)` (matmul template)
    linear_out: tuple = ()  # that Linear's output shape (rows, features) at the traced sizes
    gemm: Gemm | None = None  # forward_src then calls `self._gemm(a, b)`
    convs: tuple = ()  # of Conv; forward_src then calls `self._conv<i>(x, weight, bias)`
    prologue_convs: tuple = ()  # of Conv: the convolution prologues (template "conv")

    @property
    def products_only(self) -> bool:
        """Whether all the work is the library products the forward calls (its regions, if
        any, only pass values on, as a dropout that drops nothing after a Linear): a
        candidate must compute those products in kernels of its own."""
        return self.gemm is not None or (bool(self.prologues) and all(
            r.row is None and r.post is None and all(i.op == "identity" for i in r.pre.body) for r in self.regions))

    @property
    def families(self) -> tuple:
        names = {r.family for r in self.regions}
        if self.gemm is not None:
            names.add("matmul")
        if self.convs:
            names.add("conv")
        return tuple(sorted(names))

    @property
    def half_dtypes(self) -> tuple:
        """The 16-bit float dtypes its regions read or write (none: a float32 task)."""
        names = {r.out_dtype for r in self.regions}
        for r in self.regions:
            names.update(o.dtype for p in (r.pre, r.post) if p is not None for o in p.operands)
        if self.gemm is not None:
            names.add(self.gemm.dtype)
        names.update(c.dtype for c in self.convs)
        return tuple(sorted(n for n in names if n in FLOATS and n != FLOAT))
