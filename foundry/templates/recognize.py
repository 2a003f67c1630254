"""Read a task's reference `Model` into a `Description`: torch calls plus fused regions.

The forward is traced with torch.fx and its shapes propagated on the task's example
inputs; runs of pointwise nodes, at most one row op (reduction, softmax, norm, scan,
1-3-D pooling) and the pointwise nodes after it become one `Region`. Whatever is left
(matmul, convolution, views) stays a torch call in the generated forward. A forward that
is exactly one matrix product of two inputs is read by recognize_gemm instead, and one
that is only a chain of convolution modules by recognize_conv.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.fx as fx
import torch.nn as nn
from torch.fx.passes.shape_prop import ShapeProp

from foundry.templates.ir import FLOAT, FLOATS, Description, Instr, Operand, Phase, Ref, Region, RowOp
from foundry.templates.decompose import decompose
from foundry.templates.forward import find_linear_epilogue, find_prologues, rewrite_forward
from foundry.templates.fxutil import NotCovered, node_dtype, node_shape, tensor_dtypes
from foundry.templates.ops import pointwise_of, rowop_of
from foundry.templates.pool_first import pool_before_pointwise_convs
from foundry.templates.recognize_conv import describe_convs, prologue_convs
from foundry.templates.recognize_gemm import describe_gemm
from foundry.templates.scan_patterns import exclusive_scans, reverse_scans

_IDENTITY_ON_ONE = ("sum", "mean", "max", "min", "logsumexp", "prod")


def trace(model: nn.Module, inputs) -> fx.GraphModule:
    """Symbolically trace `model`, rewrite the graph (decompose: composite ops as the ops
    the templates know; pool_first: an average pooling moved before the pointwise
    convolution it follows) and annotate every node with its shape and dtype."""
    try:
        gm = fx.symbolic_trace(model)
    except Exception as e:  # noqa: BLE001 - any tracing failure means "not covered"
        raise NotCovered(f"torch.fx cannot trace the forward ({type(e).__name__}: {str(e)[:200]})") from None
    gm.graph.eliminate_dead_code()
    gm.recompile()
    with torch.no_grad():
        ShapeProp(gm).propagate(*inputs)
        if decompose(gm):
            ShapeProp(gm).propagate(*inputs)
        if pool_before_pointwise_convs(gm):
            ShapeProp(gm).propagate(*inputs)
    return gm


def layout_of(op_shape, shape, split: int) -> Operand | None:
    """How an operand of `op_shape` broadcasts onto `shape` split at `split`, as an
    Operand with an empty name; None when the pattern is not [rows-suffix] x [all|none]."""
    n = len(shape)
    if len(op_shape) > n:
        return None
    aligned = (1,) * (n - len(op_shape)) + tuple(op_shape)
    mask = []
    for a, s in zip(aligned, shape):
        if a != s and a != 1:
            return None
        mask.append(a == s and s != 1)
    cols = [m for m, s in zip(mask[split:], shape[split:]) if s != 1]
    if cols and any(cols) and not all(cols):
        return None
    col = bool(cols) and all(cols)
    rows = [(i, m) for i, (m, s) in enumerate(zip(mask[:split], shape[:split])) if s != 1]
    dep = [i for i, m in rows if m]
    if not dep:
        return Operand(name="", row_from=None, col=col)
    first = dep[0]
    if any(not m for i, m in rows if i > first):
        return None
    # size-1 dims between count for nothing; start the suffix at the first dependent dim
    return Operand(name="", row_from=first, col=col)


def choose_split(shape, op_shapes) -> int | None:
    """The smallest split (largest contiguous column part) that every operand fits."""
    for split in range(len(shape) + 1):
        if all(layout_of(s, shape, split) is not None for s in op_shapes):
            return split
    return None


@dataclass
class _Growing:
    nodes: list = field(default_factory=list)
    row_node: object = None
    phase_shape: tuple = ()
    pre_shape: tuple = ()
    last: object = None
    closed: bool = False


def _analyse(node, modules):
    """('pw', PointwiseCall) | ('row', RowCall) | None, for float tensor nodes."""
    if node_dtype(node) not in (*FLOATS, "int64") or node_shape(node) is None:
        if node.op == "call_function" and node.target.__name__ == "getitem":
            return None
        return None
    pw = pointwise_of(node, modules)
    if pw is not None and node_dtype(node) in FLOATS:
        return ("pw", pw)
    src = node.args[0] if node.args else None
    rank = len(node_shape(src)) if isinstance(src, fx.Node) and node_shape(src) is not None else None
    row = rowop_of(node, modules, rank)
    if row is not None and node_dtype(row.x) in FLOATS:
        return ("row", row)
    return None


def _tuple_rows(gm, modules, skip=None):
    """torch.max(x, dim) / torch.min(x, dim) produce a tuple: map getitem nodes to row ops;
    also the scans that scan_patterns reads out of several calls (reverse, exclusive);
    `skip` collects nodes absorbed."""
    out = {}
    skip = skip if skip is not None else set()
    reverse_scans(gm, modules, out, skip)
    exclusive_scans(gm, modules, out, skip)
    for node in gm.graph.nodes:
        if node.op == "call_function" and getattr(node.target, "__name__", "") == "getitem":
            src = node.args[0]
            if isinstance(src, fx.Node) and isinstance(node.args[1], int) and node.args[1] in (0, 1):
                x = src.args[0] if src.args else None
                if not isinstance(x, fx.Node) or node_shape(x) is None or node_dtype(x) not in FLOATS:
                    continue
                row = rowop_of(src, modules, len(node_shape(x)))
                if row is not None and row.kind in ("max", "min"):
                    kind = row.kind if node.args[1] == 0 else "arg" + row.kind
                    out[node] = ("row", type(row)(row.family, kind, row.x, row.dims, row.keepdim))
    return out


def _grow(gm, modules, extra, barriers):
    """Assign fusable nodes to regions. Returns (regions, violation node or None)."""
    region_of: dict = {}
    phase_of: dict = {}
    lazy_nodes: set = set()
    regions: list[_Growing] = []

    def tensor_args(args):
        return [a for a in args if isinstance(a, fx.Node)]

    transparent = {n.args[0] for n, v in extra.items() if v and v[0] == "row"
                   and n.op == "call_function" and getattr(n.target, "__name__", "") == "getitem"}

    def close_users(node, joined, info):
        if node in transparent:
            return None  # torch.max(x, dim) feeding getitems: its getitems read x
        inputs = list(node.all_input_nodes)
        if info:
            call = info[1]
            inputs += [a for a in (call.args if info[0] == "pw" else (call.x,)) if isinstance(a, fx.Node)]
        for a in inputs:
            X = region_of.get(a)
            if X is None or X is joined:
                continue
            if a is not X.last:
                return a
            X.closed = True
        return None

    for node in gm.graph.nodes:
        if node.op in ("placeholder", "get_attr"):
            continue
        info = extra[node] if node in extra else (_analyse(node, modules) if node.op != "output" else None)
        joined = None
        if info and info[0] == "row":
            row = info[1]
            dims = row.dims
            in_shape = node_shape(row.x)
            contiguous = list(dims) == list(range(dims[0], dims[-1] + 1)) if dims else False
            if not contiguous or in_shape is None:
                info = None
            elif (row.family == "reduce" and row.keepdim and row.kind in _IDENTITY_ON_ONE
                  and all(in_shape[d] == 1 for d in dims)):
                info = ("pw", type("P", (), {"op": "identity", "args": (row.x,), "attrs": ()})())
        if info and info[0] == "pw":
            pw = info[1]
            if any(isinstance(a, fx.Node) and node_shape(a) is None for a in pw.args):
                info = None
            elif any(not isinstance(a, (fx.Node, int, float)) or isinstance(a, bool)
                     for a in pw.args if a is not None):
                info = None
        if info:
            kind, call = info
            shape = node_shape(node)
            targs = tensor_args(call.args) if kind == "pw" else [call.x]
            for X in {id(region_of[a]): region_of[a] for a in targs if a in region_of}.values():
                if X.closed or (kind == "row" and X.last not in targs):
                    continue
                inside = [a for a in targs if region_of.get(a) is X]
                want = ("post", "row") if X.row_node is not None else ("pre",)
                if any(phase_of[a] not in want for a in inside):
                    continue
                others = [a for a in targs if region_of.get(a) is not X]
                if kind == "row":
                    if X.row_node is not None or X.last is not call.x:
                        continue
                else:
                    if X.phase_shape != shape:
                        continue
                    ext = [node_shape(a) for a in others] + [_ext_shapes(X, region_of, phase_of, extra)]
                    if choose_split(shape, [s for s in _flat(ext)]) is None:
                        continue
                joined = X
                break
            lazy = joined is not None and kind == "pw" and all(
                a in lazy_nodes for a in targs if region_of.get(a) is joined)  # still a parameter-only value
            if joined is None and kind == "pw" and node not in barriers and targs and regions \
                    and not regions[-1].closed \
                    and all(a not in region_of or a in lazy_nodes and region_of[a] is regions[-1] for a in targs):
                # a computation on parameters only (e.g. rsqrt(var + eps)): evaluate it
                # inside the open region that will consume it, broadcast per element
                X = regions[-1]
                shapes = [node_shape(a) for a in targs] + [shape] + _ext_shapes(X, region_of, phase_of, extra)
                if shape != X.phase_shape and choose_split(X.phase_shape, shapes) is not None:
                    joined, lazy = X, True
            if joined is None:
                if kind == "pw":
                    if not any(node_shape(a) == shape for a in targs) or choose_split(shape, [node_shape(a) for a in targs]) is None:
                        joined = None
                    else:
                        joined = _Growing(phase_shape=shape, pre_shape=shape)
                        regions.append(joined)
                else:
                    joined = _Growing(phase_shape=node_shape(call.x), pre_shape=node_shape(call.x))
                    regions.append(joined)
            if joined is not None:
                if kind == "row":
                    joined.row_node = node
                    joined.phase_shape = shape
                    phase_of[node] = "row"
                else:
                    phase_of[node] = "post" if joined.row_node is not None else "pre"
                joined.nodes.append(node)
                if not lazy:
                    joined.last = node
                else:
                    lazy_nodes.add(node)
                region_of[node] = joined
                extra[node] = info
                if node in barriers:
                    joined.closed = True
        bad = close_users(node, joined, info)
        if bad is not None:
            return regions, bad
    return regions, None


def _flat(items):
    for it in items:
        if isinstance(it, list):
            yield from it
        else:
            yield it


def _ext_shapes(X, region_of, phase_of, extra):
    cur = "post" if X.row_node is not None else "pre"
    out = []
    for n in X.nodes:
        if phase_of[n] != cur:
            continue
        for a in extra[n][1].args:
            if isinstance(a, fx.Node) and region_of.get(a) is not X:
                out.append(node_shape(a))
    return out


def _phase(nodes, shape, region_nodes, extra, row_node=None, anchor_node=None, result_node=None):
    """Build a Phase from pointwise nodes on `shape`."""
    operands: list = []
    index: dict = {}
    if anchor_node is not None:
        index[anchor_node] = 0
        operands.append(anchor_node)
    instrs: list = []
    pos: dict = {}

    def ref(a):
        if isinstance(a, fx.Node):
            if a is row_node:
                return Ref("row")
            if a in pos:
                return Ref("val", pos[a])
            if a not in index:
                index[a] = len(operands)
                operands.append(a)
            return Ref("in", index[a])
        return Ref("const", value=float(a))

    for n in nodes:
        call = extra[n][1]
        instrs.append(Instr(call.op, tuple(ref(a) for a in call.args if a is not None), tuple(call.attrs)))
        pos[n] = len(instrs) - 1
    split = choose_split(shape, [node_shape(o) for o in operands])
    if split is None:
        raise NotCovered("operands do not broadcast in a supported pattern")
    ops = []
    for o in operands:
        lay = layout_of(node_shape(o), shape, split)
        ops.append(Operand(name=o.name, dtype=node_dtype(o) or "float32", row_from=lay.row_from, col=lay.col))
    if result_node is not None and result_node in pos:
        result = Ref("val", pos[result_node])
    elif result_node is not None and result_node is row_node:
        result = Ref("row")
    elif instrs and result_node is None and anchor_node is None:
        result = Ref("val", len(instrs) - 1)
    elif row_node is not None:
        result = Ref("row")
    else:
        result = Ref("in", 0)
    return Phase(rank=len(shape), split=split, operands=tuple(ops), body=tuple(instrs), result=result), operands


def describe(model: nn.Module, inputs) -> Description:
    """Read `model`'s forward (run on `inputs` for shapes) into a Description.
    Raises NotCovered when no fusable region exists or the rest cannot be re-emitted."""
    gm = trace(model, inputs)
    lone_product = describe_gemm(gm)
    if lone_product is not None:
        return lone_product
    conv_chain = describe_convs(gm)
    if conv_chain is not None:
        return conv_chain
    modules = dict(gm.named_modules())
    barriers: set = set()
    for _ in range(64):
        skip: set = set()
        extra = _tuple_rows(gm, modules, skip)
        for n in skip:
            extra[n] = None
        grown, bad = _grow(gm, modules, extra, barriers)
        if bad is None:
            break
        barriers.add(bad)
    else:
        raise NotCovered("could not partition the graph into fusable regions")
    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    regions: list = []
    for i, g in enumerate(grown):
        if g.last in out_node.all_input_nodes or any(u.op != "output" for u in g.last.users):
            regions.append((i, g))
    if not regions:
        dtypes = tensor_dtypes(gm)
        names = {str(d).replace("torch.", "") for d in dtypes if d.is_floating_point}
        if names and not names & set(FLOATS):
            raise NotCovered(f"the templates read and write {', '.join(FLOATS)} only; this forward computes in "
                             f"{', '.join(sorted(names))}")
        raise NotCovered("no fusable pointwise, reduction, softmax, norm, scan, pooling or loss op in the forward")
    built = []
    for k, (_, g) in enumerate(regions):
        built.append(_build_region(f"_k{k}", g, extra, modules))
    src = rewrite_forward(gm, [g for _, g in regions], built, extra)
    prologues = tuple(find_prologues(gm, modules))
    lin, lin_region, lin_fwd, lin_out = find_linear_epilogue(gm, modules, [g for _, g in regions], built)
    return Description(regions=tuple(built), forward_src=src, prologues=prologues,
                       linear_epilogue=lin, linear_region=lin_region, linear_forward=lin_fwd,
                       linear_out=lin_out, prologue_convs=prologue_convs(gm))


def _build_region(name, g, extra, modules) -> Region:
    pre_nodes = [n for n in g.nodes if g.row_node is None or g.nodes.index(n) < g.nodes.index(g.row_node)]
    post_nodes = [] if g.row_node is None else g.nodes[g.nodes.index(g.row_node) + 1:]
    row = None
    if g.row_node is not None:
        call = extra[g.row_node][1]
        x = call.x
        if x in pre_nodes:
            anchor_node = None
        else:
            anchor_node = x
        pre, pre_ops = _phase(pre_nodes, node_shape(x), g.nodes, extra, anchor_node=anchor_node,
                              result_node=x if x in pre_nodes else None)
        if anchor_node is None and not any(node_shape(o) == node_shape(x) for o in pre_ops):
            raise NotCovered("a fused region has no full-shape input")
        anchor = next(i for i, o in enumerate(pre_ops) if node_shape(o) == node_shape(x))
        row = RowOp(family=call.family, kind=call.kind, dim_start=call.dims[0],
                    dim_end=call.dims[-1] + 1, keepdim=call.keepdim, reverse=call.reverse,
                    exclusive=call.exclusive,
                    eps=float(call.eps), groups=int(call.groups), groups_module=call.groups_module, weight=_attr_var(call.weight),
                    bias=_attr_var(call.bias), window=call.window,
                    index=call.index.name if call.index is not None else None, ignore_index=call.ignore_index,
                    reduction=call.reduction,
                    out_dtype="int64" if call.kind in ("argmax", "argmin") else FLOAT)
        out_shape = node_shape(g.row_node)
        post = None
        if post_nodes:
            if row.out_dtype != FLOAT:
                raise NotCovered("pointwise ops after argmax/argmin")
            post, _ = _phase(post_nodes, out_shape, g.nodes, extra, row_node=g.row_node, result_node=g.last)
        return Region(name=name, pre=pre, row=row, post=post, anchor=anchor, out_rank=len(node_shape(g.last)),
                      out_dtype=row.out_dtype if row.out_dtype != FLOAT else _float_dtype(g.last))
    shape = g.pre_shape
    pre, pre_ops = _phase(pre_nodes, shape, g.nodes, extra, result_node=g.last)
    anchors = [i for i, o in enumerate(pre_ops) if node_shape(o) == shape]
    if not anchors:
        raise NotCovered("a fused region has no full-shape input")
    return Region(name=name, pre=pre, row=None, post=None, anchor=anchors[0], out_rank=len(shape),
                  out_dtype=_float_dtype(g.last))


def _float_dtype(node) -> str:
    """The float dtype a region stores its result in: its last node's (computed in FLOAT)."""
    dtype = node_dtype(node)
    return dtype if dtype in FLOATS else FLOAT


def _attr_var(path):
    return None if path is None else "_w_" + path.replace(".", "_")
