"""Graph rewrite before recognition: an average pooling moved in front of the pointwise
(1 x 1) convolution it follows.

A convolution whose kernel is one position (stride 1, no padding) is the same linear map,
plus bias, at every spatial position; an average pooling without padding is a mean over
windows of positions. The two commute: pooling the convolution's output equals convolving
the pooled input, bias included (each window's mean of `W x + b` is `W mean(x) + b`).
Pooled first, the convolution runs on one position per window instead of every position
(4x fewer products and a 4x smaller output to write for a 2 x 2 window), and the pooling
joins the pointwise work before the convolution in one region. DenseNet's transition
layers (BatchNorm, ReLU, 1 x 1 convolution, 2 x 2 average pooling) are this pattern.

Rewritten: an nn.Conv1d/2d/3d module call, not transposed, kernel 1, stride 1, padding 0,
whose only user is a 1-, 2- or 3-D average pooling of the same rank (module, F.avg_poolNd
or ATen's avg_poolNd, floor mode, no padding, no divisor override) or an adaptive average
pooling to one position per channel. The results differ from the original order only in
float rounding.
"""

from __future__ import annotations

import torch.fx as fx
import torch.nn as nn

from foundry.templates.fxutil import node_shape
from foundry.templates.ops import rowop_of

_CONVS = (nn.Conv1d, nn.Conv2d, nn.Conv3d)


def pool_before_pointwise_convs(gm: fx.GraphModule) -> bool:
    """Rewrite every such convolution-then-pooling pair of `gm` in place (pooling first);
    True when any was rewritten (shapes must then be propagated again)."""
    modules = dict(gm.named_modules())
    changed = False
    for conv in list(gm.graph.nodes):
        if not _pointwise_conv(conv, modules) or len(conv.users) != 1:
            continue
        pool = next(iter(conv.users))
        if not _average_pooling_of(pool, conv, modules):
            continue
        x = conv.args[0]
        pool.replace_input_with(conv, x)
        with gm.graph.inserting_after(pool):
            moved = gm.graph.call_module(conv.target, (pool,), dict(conv.kwargs))
        pool.replace_all_uses_with(moved, delete_user_cb=lambda user: user is not moved)
        gm.graph.erase_node(conv)
        changed = True
    if changed:
        gm.recompile()
    return changed


def _pointwise_conv(node: fx.Node, modules: dict) -> bool:
    """A call of a standard convolution module with a one-position kernel, stride 1 and no
    padding, on one tensor argument."""
    if node.op != "call_module" or len(node.args) != 1 or node.kwargs:
        return False
    mod = modules.get(node.target)
    if type(mod) not in _CONVS or not isinstance(node.args[0], fx.Node):
        return False
    padding = (0,) * len(mod.kernel_size) if mod.padding == "valid" else mod.padding
    return set(mod.kernel_size) == {1} and set(mod.stride) == {1} and set(padding) == {0}


def _average_pooling_of(pool: fx.Node, conv: fx.Node, modules: dict) -> bool:
    """Whether `pool` averages `conv`'s output (its only tensor argument) over windows
    without padding, keeping the (N, C, *spatial) layout."""
    shape = node_shape(conv)
    if shape is None or [a for a in pool.all_input_nodes] != [conv]:
        return False
    row = rowop_of(pool, modules, len(shape))
    if row is None or row.x is not conv:
        return False
    if row.family == "pool":
        return row.kind == "avg" and set(row.window.padding) == {0}
    # an adaptive average pooling to one position: a mean over every spatial dim, kept
    return row.family == "reduce" and row.kind == "mean" and row.keepdim and row.dims == tuple(range(2, len(shape)))
