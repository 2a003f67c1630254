"""Scans written as several torch calls, read as one scan row op: a reverse cumsum
(`x.flip(d).cumsum(d).flip(d)`) and an exclusive cumsum, in either of its two usual
forms along dim d of x (L elements there):

- `cumsum(cat([zeros, x[.., :L-1]], d), d)`: the shifted input scanned;
- `cat([zeros, cumsum(x[.., :L-1], d)], d)`: the scan of all but the last element, shifted.

`zeros` is any zeros_like / zeros / new_zeros of x's shape with 1 at d and x's dtype, and
`x[.., :L-1]` any getitem or narrow that keeps the first L-1 elements of d and every
element of the other dims. Each matcher maps the node that computes the whole result to
("row", RowCall) and adds the nodes it absorbs to `skip` (left to torch if anything else
still reads them, else dropped as dead code)."""

from __future__ import annotations

from dataclasses import replace

import torch
import torch.fx as fx

from foundry.templates.fxutil import node_dtype, node_shape
from foundry.templates.ir import FLOATS
from foundry.templates.ops import rowop_of

_CATS = (torch.cat, torch.concat)
_ZEROS_FUNCS = (torch.zeros_like, torch.zeros)


def _flip_dims(node) -> tuple | None:
    """The dims a flip node reverses, or None where `node` is not a flip."""
    if node.op == "call_method" and node.target == "flip":
        d = node.args[1:] if len(node.args) > 1 else (node.kwargs.get("dims"),)
    elif node.op == "call_function" and node.target is torch.flip:
        d = (node.args[1] if len(node.args) > 1 else node.kwargs.get("dims"),)
    else:
        return None
    d = d[0] if len(d) == 1 and isinstance(d[0], (list, tuple)) else d
    return tuple(d) if all(isinstance(v, int) for v in d) else None


def reverse_scans(gm: fx.GraphModule, modules: dict, out: dict, skip: set) -> None:
    """x.flip(d).cumsum(d).flip(d) -> one reverse scan."""
    for outer_flip in gm.graph.nodes:
        outer_dims = _flip_dims(outer_flip)
        scan = outer_flip.args[0] if outer_dims and outer_flip.args else None
        if not isinstance(scan, fx.Node) or len(scan.users) != 1 or len(outer_dims) != 1:
            continue
        inner_flip = scan.args[0] if scan.args else None
        if not isinstance(inner_flip, fx.Node) or len(inner_flip.users) != 1:
            continue
        inner_dims = _flip_dims(inner_flip)
        x = inner_flip.args[0] if inner_dims else None
        if not isinstance(x, fx.Node) or node_shape(x) is None or node_dtype(x) not in FLOATS:
            continue
        rank = len(node_shape(x))
        row = rowop_of(scan, modules, rank)
        if row is None or row.family != "scan" or len(inner_dims) != 1:
            continue
        d = row.dims[0]
        if inner_dims[0] % rank != d or outer_dims[0] % rank != d:
            continue
        out[outer_flip] = ("row", type(row)("scan", row.kind, x, (d,), True, reverse=True))
        skip.update((inner_flip, scan))


def exclusive_scans(gm: fx.GraphModule, modules: dict, out: dict, skip: set) -> None:
    """Both forms of an exclusive cumsum (module docstring) -> one exclusive scan of x."""
    for node in gm.graph.nodes:
        parts = _cat_of(node)
        if parts is None:
            continue
        (zeros, second), dim = parts
        if len(second.users) == 1:
            # second form: node = cat([zeros, cumsum(x[.., :L-1], d)], d)
            row = _forward_cumsum(second, modules)
            if row is not None and isinstance(row.x, fx.Node) and len(row.x.users) == 1:
                x = _shifted_source(row.x, zeros, dim, row.dims[0])
                if x is not None:
                    out[node] = ("row", replace(row, x=x, exclusive=True))
                    skip.update((second, row.x, zeros))
                    continue
        if len(node.users) != 1:
            continue
        scan = next(iter(node.users))
        row = _forward_cumsum(scan, modules)
        # first form: scan = cumsum(cat([zeros, x[.., :L-1]], d), d)
        if row is None or row.x is not node:
            continue
        x = _shifted_source(second, zeros, dim, row.dims[0])
        if x is not None:
            out[scan] = ("row", replace(row, x=x, exclusive=True))
            skip.update((node, second, zeros))


def _shifted_source(kept, zeros, cat_dim: int, d: int) -> fx.Node | None:
    """x where `kept` is x[.., :L-1] along d and `zeros` the zeros that go before it in a
    cat along d, else None."""
    x = _first_all_but_last(kept, d)
    if x is None or cat_dim % len(node_shape(x)) != d or not _zeros_before(zeros, x, d):
        return None
    return x


def _forward_cumsum(node, modules):
    """The RowCall of a forward (not reversed, not exclusive) cumsum over one dim, else None."""
    if not isinstance(node, fx.Node) or not node.args or not isinstance(node.args[0], fx.Node):
        return None
    shape = node_shape(node.args[0])
    if shape is None:
        return None
    row = rowop_of(node, modules, len(shape))
    if row is None or row.family != "scan" or row.kind != "cumsum" or row.reverse or len(row.dims) != 1:
        return None
    return row


def _cat_of(node) -> tuple | None:
    """((first, second), dim) of a torch.cat of two tensors, else None."""
    if node.op != "call_function" or node.target not in _CATS or not node.args:
        return None
    tensors = node.args[0]
    dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
    if not isinstance(tensors, (list, tuple)) or len(tensors) != 2 or not isinstance(dim, int):
        return None
    if not all(isinstance(t, fx.Node) for t in tensors):
        return None
    return tuple(tensors), dim


def _zeros_before(node, x: fx.Node, d: int) -> bool:
    """Whether `node` is zeros of x's dtype and of x's shape with 1 at d."""
    zeros = (node.op == "call_function" and node.target in _ZEROS_FUNCS) or (
        node.op == "call_method" and node.target == "new_zeros")
    want = list(node_shape(x))
    want[d] = 1
    return zeros and node_shape(node) is not None and list(node_shape(node)) == want \
        and node_dtype(node) == node_dtype(x)


def _first_all_but_last(node, d: int) -> fx.Node | None:
    """x where `node` keeps the first L-1 of x's L elements along d and all of every
    other dim (a getitem of slices from 0 with step 1, or a narrow from 0), else None."""
    if not isinstance(node, fx.Node) or not node.args or not isinstance(node.args[0], fx.Node):
        return None
    x = node.args[0]
    x_shape, shape = node_shape(x), node_shape(node)
    if x_shape is None or shape is None or node_dtype(x) not in FLOATS or len(x_shape) != len(shape):
        return None
    want = list(x_shape)
    want[d] = x_shape[d] - 1
    if list(shape) != want or want[d] < 1:
        return None
    if node.op == "call_function" and getattr(node.target, "__name__", "") == "getitem":
        index = node.args[1] if isinstance(node.args[1], tuple) else (node.args[1],)
        starts_at_zero = all(isinstance(s, slice) and s.start in (None, 0) and s.step in (None, 1) for s in index)
        return x if starts_at_zero and len(index) <= len(x_shape) else None
    narrow = (node.op == "call_method" and node.target == "narrow") or (
        node.op == "call_function" and node.target is torch.narrow)
    if narrow:
        args = list(node.args[1:])
        dim = args[0] if args else node.kwargs.get("dim")
        start = args[1] if len(args) > 1 else node.kwargs.get("start")
        return x if isinstance(dim, int) and dim % len(x_shape) == d and start == 0 else None
    return None
