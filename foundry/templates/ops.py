"""Which torch calls are which fusable ops: pointwise ops and row ops.

`pointwise_of(node, modules)` and `rowop_of(node, modules, shape)` read one torch.fx node
and return the op in the description's vocabulary, or None when the node is not one.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from foundry.templates.fxutil import dtype_of, shape_of
from foundry.templates.ir import PoolWindow

UNARY = ("relu", "sigmoid", "tanh", "gelu", "silu", "mish", "hardswish", "hardsigmoid",
         "hardtanh", "elu", "selu", "softplus", "softsign", "leaky_relu", "clamp", "exp",
         "log", "sqrt", "rsqrt", "abs", "neg", "reciprocal", "identity")
BINARY = ("add", "sub", "mul", "div", "maximum", "minimum", "pow")
MASKED = ("masked_fill_eq",)  # (x, m) -> v where m == c, else x (attrs c, v)
POINTWISE = UNARY + BINARY + MASKED


def masked_fill_eq(x: torch.Tensor, m: torch.Tensor, c: float, v: float) -> torch.Tensor:
    """`x.masked_fill(m == c, v)`, one pointwise op of the templates (decompose.py writes
    the pair as this call, so the comparison needs no boolean value of its own)."""
    return x.masked_fill(m == c, v)


def _fns(*names_and_objs):
    out = {}
    for name, objs in names_and_objs:
        for o in objs:
            if o is not None:
                out[o] = name
    return out


_g = getattr
_FUNCS = _fns(
    ("relu", [torch.relu, F.relu, _g(torch, "relu_", None)]),
    ("sigmoid", [torch.sigmoid, F.sigmoid]), ("tanh", [torch.tanh, F.tanh]),
    ("gelu", [F.gelu]), ("silu", [F.silu]), ("mish", [F.mish]),
    ("hardswish", [F.hardswish]), ("hardsigmoid", [F.hardsigmoid]),
    ("hardtanh", [F.hardtanh]), ("relu6", [F.relu6]), ("elu", [F.elu]), ("selu", [F.selu, torch.selu]),
    ("softplus", [F.softplus]), ("softsign", [F.softsign]), ("leaky_relu", [F.leaky_relu]),
    ("clamp", [torch.clamp, torch.clip]), ("clamp_min", [torch.clamp_min]), ("clamp_max", [torch.clamp_max]),
    ("exp", [torch.exp]), ("log", [torch.log]),
    ("sqrt", [torch.sqrt]), ("rsqrt", [torch.rsqrt]), ("abs", [torch.abs]),
    ("neg", [torch.neg, operator.neg]), ("reciprocal", [torch.reciprocal]),
    ("add", [torch.add, operator.add]), ("sub", [torch.sub, torch.subtract, operator.sub]),
    ("mul", [torch.mul, torch.multiply, operator.mul]),
    ("div", [torch.div, torch.divide, torch.true_divide, operator.truediv]),
    ("maximum", [torch.maximum]), ("minimum", [torch.minimum]),
    ("pow", [torch.pow, operator.pow]), ("identity", [F.dropout]),
    ("masked_fill_eq", [masked_fill_eq]),
)
_METHODS = {m: m for m in ("relu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "abs",
                           "neg", "reciprocal", "add", "sub", "mul", "div", "clamp", "pow")}
_METHODS.update({"subtract": "sub", "multiply": "mul", "divide": "div", "true_divide": "div"})
_METHODS.update({"clip": "clamp", "maximum": "maximum", "minimum": "minimum", "clamp_min": "clamp_min",
                 "clamp_max": "clamp_max"})
_MODULES = {nn.ReLU: "relu", nn.Sigmoid: "sigmoid", nn.Tanh: "tanh", nn.GELU: "gelu",
            nn.SiLU: "silu", nn.Mish: "mish", nn.Hardswish: "hardswish",
            nn.Hardsigmoid: "hardsigmoid", nn.Hardtanh: "hardtanh", nn.ReLU6: "relu6",
            nn.ELU: "elu", nn.SELU: "selu", nn.Softplus: "softplus", nn.Softsign: "softsign",
            nn.LeakyReLU: "leaky_relu", nn.Identity: "identity", nn.Dropout: "identity"}


@dataclass(frozen=True)
class PointwiseCall:
    op: str
    args: tuple  # fx Nodes or python numbers
    attrs: tuple = ()


def _arg(node, i, name, default=None):
    if len(node.args) > i:
        return node.args[i]
    return node.kwargs.get(name, default)


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def pointwise_of(node, modules: dict) -> PointwiseCall | None:
    """The pointwise op a node computes, or None."""
    if node.op == "call_function":
        name = _FUNCS.get(node.target)
    elif node.op == "call_method":
        name = _METHODS.get(node.target)
    elif node.op == "call_module":
        mod = modules.get(node.target)
        name = _MODULES.get(type(mod))
        if type(mod) is nn.Dropout and mod.training and mod.p > 0:
            return None
        return _module_call(name, mod, node) if name else None
    else:
        return None
    if name is None:
        return None
    x = node.args[0] if node.args else node.kwargs.get("input")
    if name == "masked_fill_eq":
        x, m, c, v = node.args
        return PointwiseCall(name, (x, m), (("c", float(c)), ("v", float(v))))
    if name in BINARY:
        y = _arg(node, 1, "other", _arg(node, 1, "exponent"))
        if name in ("add", "sub") and _arg(node, 2, "alpha", 1) != 1:
            return None
        if name == "div" and node.kwargs.get("rounding_mode") is not None:
            return None
        if name == "pow" and not _num(y):
            return None
        return PointwiseCall(name, (x, y))
    if name == "identity":  # F.dropout
        if _arg(node, 2, "training", True) and _arg(node, 1, "p", 0.5) > 0:
            return None
        return PointwiseCall("identity", (x,))
    if name == "relu6":
        return PointwiseCall("hardtanh", (x,), (("lo", 0.0), ("hi", 6.0)))
    if name in ("clamp_min", "clamp_max"):
        v = _arg(node, 1, "min" if name == "clamp_min" else "max")
        if not _num(v):
            return None
        return PointwiseCall("clamp", (x,), (("lo", v if name == "clamp_min" else None),
                                             ("hi", v if name == "clamp_max" else None)))
    if name == "clamp":
        lo, hi = _arg(node, 1, "min"), _arg(node, 2, "max")
        if (lo is not None and not _num(lo)) or (hi is not None and not _num(hi)):
            return None
        return PointwiseCall("clamp", (x,), (("lo", lo), ("hi", hi)))
    attrs = {
        "gelu": lambda: (("approximate", node.kwargs.get("approximate", "none")),),
        "hardtanh": lambda: (("lo", float(_arg(node, 1, "min_val", -1.0))),
                             ("hi", float(_arg(node, 2, "max_val", 1.0)))),
        "elu": lambda: (("alpha", float(_arg(node, 1, "alpha", 1.0))),),
        "softplus": lambda: (("beta", float(_arg(node, 1, "beta", 1.0))),
                             ("threshold", float(_arg(node, 2, "threshold", 20.0)))),
        "leaky_relu": lambda: (("slope", float(_arg(node, 1, "negative_slope", 0.01))),),
    }.get(name, lambda: ())()
    return PointwiseCall(name, (x,), attrs)


def _module_call(name, mod, node) -> PointwiseCall:
    x = node.args[0]
    if name == "gelu":
        return PointwiseCall(name, (x,), (("approximate", mod.approximate),))
    if name in ("hardtanh", "relu6"):
        return PointwiseCall("hardtanh", (x,), (("lo", float(mod.min_val)), ("hi", float(mod.max_val))))
    if name == "elu":
        return PointwiseCall(name, (x,), (("alpha", float(mod.alpha)),))
    if name == "softplus":
        return PointwiseCall(name, (x,), (("beta", float(mod.beta)), ("threshold", float(mod.threshold))))
    if name == "leaky_relu":
        return PointwiseCall(name, (x,), (("slope", float(mod.negative_slope)),))
    return PointwiseCall(name, (x,))


@dataclass(frozen=True)
class RowCall:
    family: str
    kind: str
    x: object  # the input node
    dims: tuple  # normalised, sorted
    keepdim: bool = False
    reverse: bool = False
    exclusive: bool = False  # a scan: each output leaves its own element out
    eps: float = 1e-5
    groups: int = 1
    groups_module: str | None = None  # GroupNorm: the module path whose num_groups the candidate reads
    weight: str | None = None  # module attribute path of the affine weight
    bias: str | None = None
    tuple_index: int | None = None  # for torch.max(x, dim): which output the user takes
    window: PoolWindow | None = None  # pooling
    index: object = None  # cross entropy: the node of each row's class
    ignore_index: int = -100
    reduction: str = "none"


_REDUCE_FUNCS = _fns(("sum", [torch.sum]), ("mean", [torch.mean]), ("amax", [torch.amax]),
                     ("amin", [torch.amin]), ("argmax", [torch.argmax]), ("argmin", [torch.argmin]),
                     ("logsumexp", [torch.logsumexp]), ("prod", [torch.prod]),
                     ("max", [torch.max]), ("min", [torch.min]), ("norm", [torch.norm]),
                     ("softmax", [torch.softmax, F.softmax]),
                     ("log_softmax", [torch.log_softmax, F.log_softmax]),
                     ("cumsum", [torch.cumsum]), ("cumprod", [torch.cumprod]),
                     ("vector_norm", [torch.linalg.vector_norm]))
_REDUCE_METHODS = ("sum", "mean", "amax", "amin", "argmax", "argmin", "logsumexp", "prod",
                   "max", "min", "norm", "softmax", "log_softmax", "cumsum", "cumprod")


def _dims(d, rank):
    if d is None:
        return tuple(range(rank))
    if isinstance(d, int):
        d = (d,)
    if not all(isinstance(v, int) for v in d):
        return None
    return tuple(sorted(v % rank for v in d))


def _spatial(v, n: int):
    """An int or an n-sequence of ints as an n-tuple, else None."""
    if isinstance(v, int) and not isinstance(v, bool):
        return (v,) * n
    if isinstance(v, (tuple, list)) and all(isinstance(i, int) and not isinstance(i, bool) for i in v):
        if len(v) == n:
            return tuple(v)
        if len(v) == 1:
            return (v[0],) * n
    return None


def _pool_call(kind, x, kernel, stride, padding, *, dilation=1, ceil_mode=False, extra_ok=True,
               count_include_pad=True, rank=None, spatial: int = 2) -> RowCall | None:
    """A 1-, 2- or 3-D max/avg pooling (`spatial` dims after N and C; floor mode; dilation
    only for max) over an (N, C, *spatial) input as a row op, or None."""
    if rank != spatial + 2 or ceil_mode or not extra_ok:
        return None
    k = _spatial(kernel, spatial)
    s = _spatial(kernel if stride in (None, [], ()) else stride, spatial)
    p, d = _spatial(padding, spatial), _spatial(dilation, spatial)
    if None in (k, s, p, d) or min(k) < 1 or min(s) < 1 or min(d) < 1 or min(p) < 0:
        return None
    if any(pad * 2 > size for pad, size in zip(p, k)) or (kind == "avg" and set(d) != {1}):
        return None
    window = PoolWindow(kernel=k, stride=s, padding=p, dilation=d, count_include_pad=bool(count_include_pad))
    return RowCall("pool", kind, x, tuple(range(2, 2 + spatial)), True, window=window)


# function -> (kind, spatial dims)
# (torch.max_pool2d and its kin, which the extracted tasks call, take F's positional order)
_POOL_FUNCS = {F.max_pool1d: ("max", 1), F.max_pool2d: ("max", 2), F.max_pool3d: ("max", 3),
               torch.max_pool1d: ("max", 1), torch.max_pool2d: ("max", 2), torch.max_pool3d: ("max", 3),
               F.avg_pool1d: ("avg", 1), F.avg_pool2d: ("avg", 2), F.avg_pool3d: ("avg", 3),
               # ATen's own overloads, which extracted tasks call where torch has no function of
               # that name (avg_pool2d/3d); same positional order, stride [] meaning the kernel's
               torch.ops.aten.max_pool1d.default: ("max", 1), torch.ops.aten.max_pool2d.default: ("max", 2),
               torch.ops.aten.max_pool3d.default: ("max", 3), torch.ops.aten.avg_pool1d.default: ("avg", 1),
               torch.ops.aten.avg_pool2d.default: ("avg", 2), torch.ops.aten.avg_pool3d.default: ("avg", 3)}
_MAX_POOLS = {nn.MaxPool1d: 1, nn.MaxPool2d: 2, nn.MaxPool3d: 3}
_AVG_POOLS = {nn.AvgPool1d: 1, nn.AvgPool2d: 2, nn.AvgPool3d: 3}
_ADAPTIVE_AVG = {F.adaptive_avg_pool1d: 1, F.adaptive_avg_pool2d: 2, F.adaptive_avg_pool3d: 3}
_ADAPTIVE_AVG_MODULES = {nn.AdaptiveAvgPool1d: 1, nn.AdaptiveAvgPool2d: 2, nn.AdaptiveAvgPool3d: 3}


def _global_average(x, output_size, rank, spatial: int) -> RowCall | None:
    """Adaptive average pooling to one element per channel: a mean over the spatial dims."""
    if rank != spatial + 2 or _spatial(output_size, spatial) != (1,) * spatial:
        return None
    return RowCall("reduce", "mean", x, tuple(range(2, rank)), True)


def _pool_of(node, mod, rank) -> RowCall | None:
    if node.op == "call_module":
        x = node.args[0] if node.args else None
        if type(mod) in _MAX_POOLS:
            return _pool_call("max", x, mod.kernel_size, mod.stride, mod.padding, dilation=mod.dilation,
                              ceil_mode=mod.ceil_mode, extra_ok=not mod.return_indices, rank=rank,
                              spatial=_MAX_POOLS[type(mod)])
        if type(mod) in _AVG_POOLS:
            return _pool_call("avg", x, mod.kernel_size, mod.stride, mod.padding, ceil_mode=mod.ceil_mode,
                              count_include_pad=mod.count_include_pad,
                              extra_ok=getattr(mod, "divisor_override", None) is None, rank=rank,
                              spatial=_AVG_POOLS[type(mod)])
        if type(mod) in _ADAPTIVE_AVG_MODULES:
            return _global_average(x, mod.output_size, rank, _ADAPTIVE_AVG_MODULES[type(mod)])
        return None
    if node.op != "call_function":
        return None
    x = node.args[0] if node.args else node.kwargs.get("input")
    if node.target in _ADAPTIVE_AVG:
        return _global_average(x, _arg(node, 1, "output_size"), rank, _ADAPTIVE_AVG[node.target])
    kind, spatial = _POOL_FUNCS.get(node.target, (None, 0))
    if kind is None:
        return None
    kernel = _arg(node, 1, "kernel_size")
    stride = _arg(node, 2, "stride", None)
    padding = _arg(node, 3, "padding", 0)
    if kind == "max":
        return _pool_call("max", x, kernel, stride, padding, dilation=_arg(node, 4, "dilation", 1),
                          ceil_mode=_arg(node, 5, "ceil_mode", False),
                          extra_ok=not _arg(node, 6, "return_indices", False), rank=rank, spatial=spatial)
    # avg_pool1d has no divisor_override
    return _pool_call("avg", x, kernel, stride, padding, ceil_mode=_arg(node, 4, "ceil_mode", False),
                      count_include_pad=_arg(node, 5, "count_include_pad", True),
                      extra_ok=spatial == 1 or _arg(node, 6, "divisor_override", None) is None, rank=rank,
                      spatial=spatial)


def _cross_entropy(node, mod) -> RowCall | None:
    """F.cross_entropy / nn.CrossEntropyLoss of an (N, C) float32 input and (N,) int64
    classes, without class weights or label smoothing, as a row op over C."""
    if node.op == "call_module":
        if not isinstance(mod, nn.CrossEntropyLoss) or len(node.args) != 2 or node.kwargs:
            return None
        x, target = node.args
        weight, ignore_index, reduction, smoothing = mod.weight, mod.ignore_index, mod.reduction, mod.label_smoothing
        legacy = None
    elif node.op == "call_function" and node.target is F.cross_entropy:
        x, target = (node.args[0] if node.args else node.kwargs.get("input")), _arg(node, 1, "target")
        weight, ignore_index = _arg(node, 2, "weight"), _arg(node, 4, "ignore_index", -100)
        reduction, smoothing = _arg(node, 6, "reduction", "mean"), _arg(node, 7, "label_smoothing", 0.0)
        legacy = (_arg(node, 3, "size_average"), _arg(node, 5, "reduce"))
    else:
        return None
    if weight is not None or smoothing != 0.0 or legacy not in (None, (None, None)) \
            or reduction not in ("none", "sum", "mean") or not isinstance(ignore_index, int):
        return None
    shapes = [shape_of(v) for v in (x, target)]
    if None in shapes or len(shapes[0]) != 2 or shapes[1] != shapes[0][:1] \
            or [dtype_of(v) for v in (x, target)] != ["float32", "int64"]:
        return None
    return RowCall("loss", "cross_entropy", x, (1,), False, index=target, ignore_index=int(ignore_index),
                   reduction=reduction)


def rowop_of(node, modules: dict, in_rank: int | None) -> RowCall | None:
    """The row op a node computes (reduction, softmax, norm, scan, 1-3-D pooling, cross
    entropy; a global average pooling is a mean), or None."""
    if in_rank is None:
        return None
    mod = modules.get(node.target) if node.op == "call_module" else None
    special = _pool_of(node, mod, in_rank) or _cross_entropy(node, mod)
    if special is not None:
        return special
    if node.op == "call_module":
        return _module_rowop(node, modules.get(node.target), in_rank)
    if node.op == "call_function":
        name = _REDUCE_FUNCS.get(node.target)
    elif node.op == "call_method":
        name = node.target if node.target in _REDUCE_METHODS else None
    else:
        return None
    if name is None:
        return None
    x = node.args[0] if node.args else node.kwargs.get("input", node.kwargs.get("x"))
    if name == "vector_norm":
        p = _arg(node, 1, "ord", 2)
        dims = _dims(_arg(node, 2, "dim"), in_rank)
        kind = {2: "norm_l2", 1: "norm_l1"}.get(p)
        if kind is None or dims is None or node.kwargs.get("dtype") is not None:
            return None
        return RowCall("reduce", kind, x, dims, bool(_arg(node, 3, "keepdim", False)))
    if name == "norm":
        p = _arg(node, 1, "p", "fro")
        dims = _dims(_arg(node, 2, "dim"), in_rank)
        kind = {2: "norm_l2", "fro": "norm_l2", 1: "norm_l1"}.get(p)
        if kind is None or dims is None:
            return None
        return RowCall("reduce", kind, x, dims, bool(_arg(node, 3, "keepdim", False)))
    if name in ("softmax", "log_softmax"):
        d = _arg(node, 1, "dim")
        if not isinstance(d, int) or node.kwargs.get("dtype") is not None:
            return None
        return RowCall("softmax", name, x, (d % in_rank,), True)
    if name in ("cumsum", "cumprod"):
        d = _arg(node, 1, "dim")
        if not isinstance(d, int) or node.kwargs.get("dtype") is not None:
            return None
        return RowCall("scan", name, x, (d % in_rank,), True)
    d = _arg(node, 1, "dim")
    if name in ("max", "min"):
        if d is None or not isinstance(d, int):
            return None  # global max / elementwise max with a tensor
        return RowCall("reduce", name, x, (d % in_rank,), bool(_arg(node, 2, "keepdim", False)))
    if name in ("argmax", "argmin"):
        if not isinstance(d, int):
            return None
        return RowCall("reduce", name, x, (d % in_rank,), bool(_arg(node, 2, "keepdim", False)))
    if name in ("sum", "mean", "prod") and node.kwargs.get("dtype") is not None:
        return None
    dims = _dims(d, in_rank)
    if dims is None or (name == "prod" and len(dims) != 1):
        return None
    kind = {"amax": "max", "amin": "min"}.get(name, name)
    return RowCall("reduce", kind, x, dims, bool(_arg(node, 2, "keepdim", False)))


def _module_rowop(node, mod, rank) -> RowCall | None:
    x = node.args[0]
    name = node.target
    if isinstance(mod, (nn.Softmax, nn.LogSoftmax)):
        if mod.dim is None:
            return None
        kind = "softmax" if isinstance(mod, nn.Softmax) else "log_softmax"
        return RowCall("softmax", kind, x, (mod.dim % rank,), True)
    w = lambda m, a: f"{name}.{a}" if getattr(m, a, None) is not None else None  # noqa: E731
    if isinstance(mod, nn.LayerNorm):
        k = len(mod.normalized_shape)
        return RowCall("norm", "layer", x, tuple(range(rank - k, rank)), True, eps=mod.eps,
                       weight=w(mod, "weight"), bias=w(mod, "bias"))
    if hasattr(nn, "RMSNorm") and isinstance(mod, nn.RMSNorm):
        k = len(mod.normalized_shape)
        eps = mod.eps if mod.eps is not None else torch.finfo(torch.float32).eps
        return RowCall("norm", "rms", x, tuple(range(rank - k, rank)), True, eps=eps,
                       weight=w(mod, "weight"))
    if isinstance(mod, nn.GroupNorm) and rank >= 2:
        return RowCall("norm", "group", x, tuple(range(1, rank)), True, eps=mod.eps,
                       groups=mod.num_groups, groups_module=name, weight=w(mod, "weight"), bias=w(mod, "bias"))
    if isinstance(mod, (nn.InstanceNorm1d, nn.InstanceNorm2d, nn.InstanceNorm3d)) and rank >= 3:
        if mod.track_running_stats:
            return None
        return RowCall("norm", "instance", x, tuple(range(2, rank)), True, eps=mod.eps,
                       weight=w(mod, "weight"), bias=w(mod, "bias"))
    return None
