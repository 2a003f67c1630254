"""Graph rewrites before recognition: composite ops become the pointwise/row ops the
templates know, with views (movement ops) where parameters must broadcast.

- batch norm in inference form (F.batch_norm(..., training=False), or a BatchNorm
  module in eval mode): (x - mean) * rsqrt(var + eps) * weight + bias, the per-channel
  tensors viewed as (C, 1, ...) so they broadcast along dim 1;
- `torch.max(x, dim).values` / `.indices`: the tuple items 0 / 1;
- torch.min/max (and minimum/maximum) of a float tensor and `torch.tensor(c)`: a clamp;
- F.mse_loss(a, b): (a - b) * (a - b);
- F.smooth_l1_loss / F.huber_loss: branch-free with a clamp;
- F.kl_div(x, t, log_target=True): exp(t) * (t - x);
- F.triplet_margin_loss: max(margin + d(a, p) - d(a, n), 0), d a p-norm (1 or 2) of the
  difference plus eps over the last dim;
- the loss modules (nn.MSELoss, nn.SmoothL1Loss, nn.HuberLoss, nn.KLDivLoss,
  nn.TripletMarginLoss) as these calls;
- each loss of same-shaped operands with its reduction ("none", "mean", "sum"; kl_div's
  "batchmean" too) as a mean or sum over every element;
- F.cosine_similarity(a, b, dim, eps): sum(a * b) / (max(|a|, eps) * max(|b|, eps)), three
  reductions over dim (torch divides by the norms before the sum: equal within rounding);
- F.scaled_dot_product_attention(q, k, v, scale=s) without a mask, dropout, causality or
  grouped heads: softmax((q @ k^T) * s, -1) @ v, s = 1 / sqrt(q's last dim) by default;
- x.masked_fill(m == c, v) (a causal mask read from a float32 buffer, as in GPT-style
  attention), c and v numbers: one pointwise op, ops.masked_fill_eq(x, m, c, v);
- a forward that is one nn.Linear call: the call followed by an identity (F.dropout with
  p=0), an empty epilogue for the matmul templates.
"""

from __future__ import annotations

import math
import operator

import torch
import torch.fx as fx
import torch.nn as nn
import torch.nn.functional as F

from foundry.templates.fxutil import dtype_of, shape_of
from foundry.templates.ops import masked_fill_eq

_BN = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)
FX_CONSTANT = "_tensor_constant"  # torch.fx's name for a tensor made in the traced forward


def _replaced(graph, node, out) -> bool:
    """`node`'s users read `out` instead, and `node` is gone: a rewrite is done."""
    node.replace_all_uses_with(out)
    graph.erase_node(node)
    return True


def _arg(node, i, name, default=None):
    if len(node.args) > i:
        return node.args[i]
    return node.kwargs.get(name, default)


def decompose(gm: fx.GraphModule) -> bool:
    """Rewrite `gm` in place; True when anything changed (shapes must be propagated again)."""
    graph, changed = gm.graph, False
    modules = dict(gm.named_modules())
    for node in list(graph.nodes):
        changed |= _loss_module_as_function(node, modules, graph)
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target is getattr and node.args[1] in ("values", "indices"):
            with graph.inserting_before(node):
                item = graph.call_function(operator.getitem, (node.args[0], 0 if node.args[1] == "values" else 1))
            node.replace_all_uses_with(item)
            graph.erase_node(node)
            changed = True
            continue
        if _bound_by_constant(node, gm) or _mse_loss(node, graph) or _robust_loss(node, graph) or _kl_div(node, graph) \
                or _triplet_margin_loss(node, graph) or _cosine_similarity(node, graph) \
                or _attention(node, graph) or _masked_fill_eq(node, graph):
            changed = True
            continue
        bn = _batch_norm_args(node, modules, graph)
        if bn is None:
            continue
        x, mean, var, weight, bias, eps = bn
        tm = x.meta.get("tensor_meta")
        rank = len(tm.shape) if tm is not None and hasattr(tm, "shape") else None
        if rank is None or rank < 2:
            continue
        with graph.inserting_before(node):
            shape = (-1,) + (1,) * (rank - 2)

            def view(t):
                return graph.call_method("view", (t, shape)) if rank > 2 else t
            y = graph.call_function(operator.sub, (x, view(mean)))
            inv = graph.call_function(torch.rsqrt, (graph.call_function(operator.add, (view(var), float(eps))),))
            y = graph.call_function(operator.mul, (y, inv))
            if weight is not None:
                y = graph.call_function(operator.mul, (y, view(weight)))
            if bias is not None:
                y = graph.call_function(operator.add, (y, view(bias)))
        node.replace_all_uses_with(y)
        graph.erase_node(node)
        changed = True
    changed |= _lone_linear_as_epilogue(graph, modules)
    if changed:
        graph.eliminate_dead_code()
        gm.recompile()
    return changed


def _lone_linear_as_epilogue(graph, modules) -> bool:
    """A forward that is one nn.Linear call and nothing else gets an identity after it (a
    dropout that drops nothing), so the matmul templates take it as a Linear with an empty
    epilogue."""
    work = [n for n in graph.nodes if n.op not in ("placeholder", "output", "get_attr")]
    out = next(n for n in graph.nodes if n.op == "output")
    if len(work) != 1 or out.args[0] is not work[0] or work[0].op != "call_module" \
            or type(modules.get(work[0].target)) is not nn.Linear:
        return False
    with graph.inserting_after(work[0]):
        identity = graph.call_function(F.dropout, (work[0], 0.0, False))
    out.args = (identity,)
    return True


REDUCTIONS = ("none", "mean", "sum")  # a loss's reductions written here (kl_div also "batchmean")


def _reduced(graph, out, reduction: str, *, rank: int = 0):
    """`out` (a loss per element, of `rank` dims) reduced as the loss's `reduction` says:
    unchanged, its mean or sum over every element, or ("batchmean") its sum per row of
    dim 0 averaged over the rows (what the sum over the batch size is, for any batch)."""
    if reduction == "none":
        return out
    if reduction == "mean" or (reduction == "batchmean" and rank <= 1):
        return graph.call_function(torch.mean, (out,))
    if reduction == "batchmean":
        per_row = graph.call_function(torch.sum, (out,), {"dim": tuple(range(1, rank))})
        return graph.call_function(torch.mean, (per_row,))
    return graph.call_function(torch.sum, (out,))


def _same_shapes(node) -> bool:
    """Whether the loss's input and target have the same known shape (broadcasting ones
    are left to torch, which warns and broadcasts)."""
    shapes = [shape_of(v) for v in (node.args[0] if node.args else None, _arg(node, 1, "target"))]
    return None not in shapes and shapes[0] == shapes[1]


def _loss_module_as_function(node, modules, graph) -> bool:
    """A loss module's call (nn.MSELoss, nn.SmoothL1Loss, nn.HuberLoss, nn.KLDivLoss,
    nn.TripletMarginLoss) as the functional call it makes, its settings as keywords, so the
    rewrites below see it."""
    module = modules.get(node.target) if node.op == "call_module" else None
    settings = {nn.MSELoss: lambda m: (F.mse_loss, 2, {}),
                nn.SmoothL1Loss: lambda m: (F.smooth_l1_loss, 2, {"beta": m.beta}),
                nn.HuberLoss: lambda m: (F.huber_loss, 2, {"delta": m.delta}),
                nn.KLDivLoss: lambda m: (F.kl_div, 2, {"log_target": m.log_target}),
                nn.TripletMarginLoss: lambda m: (F.triplet_margin_loss, 3,
                                                 {"margin": m.margin, "p": m.p, "eps": m.eps, "swap": m.swap}),
                }.get(type(module))
    if settings is None:
        return False
    fn, operands, kwargs = settings(module)
    if len(node.args) != operands or node.kwargs:
        return False
    with graph.inserting_before(node):
        call = graph.call_function(fn, tuple(node.args), {**kwargs, "reduction": module.reduction})
    call.meta = dict(node.meta)
    return _replaced(graph, node, call)


def _constant_tensor(value, gm: fx.GraphModule) -> float | None:
    """The number a 0-d tensor constant holds (`torch.tensor(c)` in the forward, which
    tracing keeps as a `get_attr` of the attribute `_tensor_constant<N>` it adds; a
    module's own buffers and parameters are not constants), else None."""
    if not (isinstance(value, fx.Node) and value.op == "get_attr" and str(value.target).startswith(FX_CONSTANT)):
        return None
    held = getattr(gm, str(value.target), None)
    if not isinstance(held, torch.Tensor) or isinstance(held, nn.Parameter) or held.dim() != 0 or held.is_complex():
        return None
    number = float(held.item())
    return None if math.isnan(number) else number


def _bound_by_constant(node, gm: fx.GraphModule) -> bool:
    """torch.min/minimum(x, torch.tensor(c)) -> clamp(x, max=c); max/maximum -> clamp(min=c)
    for a float x of one or more dims (its dtype is the result's, as in the two-tensor
    call; a NaN in x stays NaN in both, and in the templates' clamp)."""
    if node.op != "call_function" or len(node.args) != 2 or node.kwargs:
        return False
    upper = {torch.min: True, torch.minimum: True, torch.max: False, torch.maximum: False}.get(node.target)
    x, bound = node.args
    if _constant_tensor(x, gm) is not None:
        x, bound = bound, x
    c = _constant_tensor(bound, gm)
    if upper is None or c is None or not isinstance(x, fx.Node) or _constant_tensor(x, gm) is not None:
        return False
    tm = x.meta.get("tensor_meta")
    if tm is None or not getattr(tm, "dtype", None) or not tm.dtype.is_floating_point or not len(tm.shape):
        return False  # a 0-d x would promote with the constant's dtype
    graph = gm.graph
    with graph.inserting_before(node):
        out = graph.call_function(torch.clamp, (x,), {"max" if upper else "min": c})
    return _replaced(graph, node, out)


def _mse_loss(node, graph) -> bool:
    if node.op != "call_function" or node.target is not F.mse_loss:
        return False
    reduction = _arg(node, 4, "reduction", "mean")
    if _arg(node, 2, "size_average") is not None or _arg(node, 3, "reduce") is not None \
            or _arg(node, 5, "weight") is not None or reduction not in REDUCTIONS or not _same_shapes(node):
        return False
    with graph.inserting_before(node):
        d = graph.call_function(operator.sub, (node.args[0], _arg(node, 1, "target")))
        out = _reduced(graph, graph.call_function(operator.mul, (d, d)), reduction)
    return _replaced(graph, node, out)


def _robust_loss(node, graph) -> bool:
    """smooth_l1_loss / huber_loss, branch-free with m = min(|a-b|, beta): smooth L1 =
    0.5 m^2 / beta + (d - m); Huber = 0.5 m^2 + delta (d - m); then the reduction."""
    if node.op != "call_function" or node.target not in (F.smooth_l1_loss, F.huber_loss):
        return False
    huber = node.target is F.huber_loss
    reduction = _arg(node, 2 if huber else 4, "reduction", "mean")
    if reduction not in REDUCTIONS or not _same_shapes(node):
        return False
    if not huber and (_arg(node, 2, "size_average") is not None or _arg(node, 3, "reduce") is not None):
        return False
    beta = _arg(node, 3, "delta", 1.0) if huber else node.kwargs.get("beta", node.args[5] if len(node.args) > 5 else 1.0)
    if not isinstance(beta, (int, float)) or beta <= 0 or node.kwargs.get("weight") is not None:
        return False
    with graph.inserting_before(node):
        d = graph.call_function(torch.abs, (graph.call_function(operator.sub, (node.args[0], _arg(node, 1, "target"))),))
        m = graph.call_function(torch.clamp, (d,), {"max": float(beta)})
        sq = graph.call_function(operator.mul, (graph.call_function(operator.mul, (m, m)),
                                                0.5 if huber else 0.5 / float(beta)))
        lin = graph.call_function(operator.sub, (d, m))
        if huber:
            lin = graph.call_function(operator.mul, (lin, float(beta)))
        out = _reduced(graph, graph.call_function(operator.add, (sq, lin)), reduction)
    return _replaced(graph, node, out)


def _kl_div(node, graph) -> bool:
    if node.op != "call_function" or node.target is not F.kl_div:
        return False
    reduction = _arg(node, 4, "reduction", "mean")
    if reduction not in REDUCTIONS + ("batchmean",) or not _arg(node, 5, "log_target", False) \
            or _arg(node, 2, "size_average") is not None or _arg(node, 3, "reduce") is not None \
            or not _same_shapes(node):
        return False  # with a plain target torch uses xlogy (0 where t = 0): left to torch
    x, t = node.args[0], _arg(node, 1, "target")
    shape = shape_of(x)
    with graph.inserting_before(node):
        out = graph.call_function(operator.mul, (graph.call_function(torch.exp, (t,)),
                                                 graph.call_function(operator.sub, (t, x))))
        out = _reduced(graph, out, reduction, rank=len(shape))
    return _replaced(graph, node, out)


def _triplet_margin_loss(node, graph) -> bool:
    """max(margin + d(a, p) - d(a, n), 0) with d(x, y) = ||x - y + eps|| over the last
    dim (torch's pairwise distance), then the reduction; p-norms 1 and 2, no swap."""
    if node.op != "call_function" or node.target is not F.triplet_margin_loss:
        return False
    anchor, positive, negative = (_arg(node, i, name) for i, name in enumerate(("anchor", "positive", "negative")))
    margin, p, eps = _arg(node, 3, "margin", 1.0), _arg(node, 4, "p", 2), _arg(node, 5, "eps", 1e-6)
    reduction = _arg(node, 9, "reduction", "mean")
    shapes = {shape_of(v) for v in (anchor, positive, negative)}
    if p not in (1, 2) or _arg(node, 6, "swap", False) or _arg(node, 7, "size_average") is not None \
            or _arg(node, 8, "reduce") is not None or reduction not in REDUCTIONS or len(shapes) != 1 \
            or None in shapes or not next(iter(shapes)) or not all(isinstance(v, (int, float)) for v in (margin, eps)):
        return False
    with graph.inserting_before(node):
        def distance(other):
            d = graph.call_function(operator.add, (graph.call_function(operator.sub, (anchor, other)), float(eps)))
            return graph.call_function(torch.linalg.vector_norm, (d, float(p), -1))
        gap = graph.call_function(operator.sub, (graph.call_function(operator.add, (distance(positive), float(margin))),
                                                 distance(negative)))
        out = _reduced(graph, graph.call_function(torch.clamp, (gap,), {"min": 0.0}), reduction)
    return _replaced(graph, node, out)


def _cosine_similarity(node, graph) -> bool:
    if node.op != "call_function" or node.target not in (F.cosine_similarity, torch.cosine_similarity):
        return False
    a, b = node.args[0], _arg(node, 1, "x2")
    dim, eps = _arg(node, 2, "dim", 1), _arg(node, 3, "eps", 1e-8)
    shapes = [shape_of(v) for v in (a, b)]
    if not isinstance(dim, int) or not isinstance(eps, (int, float)) or None in shapes or shapes[0] != shapes[1]:
        return False  # broadcasting operands: left to torch
    with graph.inserting_before(node):
        def norm(v):
            n = graph.call_function(torch.linalg.vector_norm, (v, 2, dim))
            return graph.call_function(torch.clamp, (n,), {"min": float(eps)})
        dot = graph.call_function(torch.sum, (graph.call_function(operator.mul, (a, b)),), {"dim": dim})
        out = graph.call_function(operator.truediv, (dot, graph.call_function(operator.mul, (norm(a), norm(b)))))
    return _replaced(graph, node, out)


def _attention(node, graph) -> bool:
    if node.op != "call_function" or node.target is not F.scaled_dot_product_attention:
        return False
    q, k, v = (_arg(node, i, name) for i, name in enumerate(("query", "key", "value")))
    plain = (_arg(node, 3, "attn_mask") is None and _arg(node, 4, "dropout_p", 0.0) == 0.0
             and _arg(node, 5, "is_causal", False) is False and node.kwargs.get("enable_gqa", False) is False)
    scale = _arg(node, 6, "scale")
    shapes = [shape_of(t) for t in (q, k, v)]
    if not plain or None in shapes or not isinstance(scale, (int, float, type(None))):
        return False  # a mask, dropout, causality or grouped heads: left to torch
    (sq, sk, sv) = shapes
    if not (len(sq) >= 2 and len(sq) == len(sk) == len(sv) and sq[:-2] == sk[:-2] == sv[:-2]
            and sq[-1] == sk[-1] and sk[-2] == sv[-2]):
        return False  # broadcasting batch dims: left to torch
    with graph.inserting_before(node):
        scores = graph.call_function(torch.matmul, (q, graph.call_method("transpose", (k, -2, -1))))
        scaled = graph.call_function(operator.mul, (scores, float(scale if scale is not None else sq[-1] ** -0.5)))
        weights = graph.call_function(torch.softmax, (scaled,), {"dim": -1})
        out = graph.call_function(torch.matmul, (weights, v))
    return _replaced(graph, node, out)


def _is_call(node, functions: tuple, method: str) -> bool:
    return isinstance(node, fx.Node) and ((node.op == "call_function" and node.target in functions)
                                          or (node.op == "call_method" and node.target == method))


def _masked_fill_eq(node, graph) -> bool:
    if not _is_call(node, (torch.masked_fill,), "masked_fill") or node.kwargs or len(node.args) != 3:
        return False
    x, mask, value = node.args
    if not _is_call(mask, (torch.eq, operator.eq), "eq") or mask.kwargs or len(mask.args) != 2:
        return False
    m, c = mask.args
    numbers = all(isinstance(n, (int, float)) and not isinstance(n, bool) for n in (c, value))
    if not numbers or dtype_of(m) != "float32" or len(mask.users) != 1:
        return False
    with graph.inserting_before(node):
        out = graph.call_function(masked_fill_eq, (x, m, float(c), float(value)))
    return _replaced(graph, node, out)


def _batch_norm_args(node, modules, graph):
    """(x, mean, var, weight, bias, eps) for a batch norm that uses running statistics."""
    if node.op == "call_function" and node.target is F.batch_norm:
        training = _arg(node, 5, "training", False)
        mean, var = _arg(node, 1, "running_mean"), _arg(node, 2, "running_var")
        if training or not isinstance(mean, fx.Node) or not isinstance(var, fx.Node):
            return None
        return (node.args[0], mean, var, _arg(node, 3, "weight"), _arg(node, 4, "bias"),
                _arg(node, 7, "eps", 1e-5))
    if node.op == "call_module" and isinstance(modules.get(node.target), _BN):
        m = modules[node.target]
        if m.training or not m.track_running_stats or m.running_mean is None:
            return None
        with graph.inserting_before(node):
            get = lambda a: graph.get_attr(f"{node.target}.{a}") if getattr(m, a, None) is not None else None  # noqa: E731
            return (node.args[0], get("running_mean"), get("running_var"), get("weight"), get("bias"), m.eps)
    return None
