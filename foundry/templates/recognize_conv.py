"""Recognise a forward that is only a chain of convolution modules (nn.Conv1d/2d/3d,
nn.ConvTranspose1d/2d/3d), the first applied to a forward input, each next one to the
previous one's output, the last one's output returned, into a tuple of `Conv`s."""

from __future__ import annotations

import torch.fx as fx
import torch.nn as nn

from foundry.templates.fxutil import NotCovered, dtype_name, dtype_of, shape_of
from foundry.templates.ir import FLOATS, Conv, Description

_CONVS = {nn.Conv1d: (1, False), nn.Conv2d: (2, False), nn.Conv3d: (3, False),
          nn.ConvTranspose1d: (1, True), nn.ConvTranspose2d: (2, True), nn.ConvTranspose3d: (3, True)}


def is_conv_module(module: object) -> bool:
    """Whether `module` is one of the convolution modules the templates take (exact types)."""
    return type(module) in _CONVS


def _module_expression(target: str) -> str:
    """The forward expression of the submodule at dotted path `target`."""
    parts = target.split(".")
    if all(p.isidentifier() for p in parts):
        return "self." + target
    return f"self.get_submodule({target!r})"


def _numeric_padding(conv: nn.Module, dims: int) -> tuple:
    """The module's zero padding per spatial dim; a string padding ("valid", "same") is
    resolved where it pads both sides of every dim alike. Raises NotCovered otherwise."""
    if not isinstance(conv.padding, str):
        return tuple(int(p) for p in conv.padding)
    if conv.padding == "valid":
        return (0,) * dims
    totals = [d * (k - 1) for d, k in zip(conv.dilation, conv.kernel_size)]
    if any(t % 2 for t in totals):
        raise NotCovered("the convolution template takes padding='same' only where it pads both sides "
                         "of every dim alike (an odd dilation * (kernel - 1) pads one side more)")
    return tuple(t // 2 for t in totals)


def conv_of(node: fx.Node, conv: nn.Module) -> Conv:
    """The Conv of one module call. Raises NotCovered for a form the template does not
    take (padding other than zeros, an unbatched input, integer or mixed dtypes)."""
    dims, transposed = _CONVS[type(conv)]
    if conv.padding_mode != "zeros":
        raise NotCovered(f"the convolution template pads with zeros only (padding_mode={conv.padding_mode!r})")
    (src,) = node.args
    in_shape, out_shape = shape_of(src), shape_of(node)
    if in_shape is None or out_shape is None or len(in_shape) != dims + 2:
        raise NotCovered("the convolution template takes a batched (N, C, *spatial) input only")
    din = dtype_of(src)
    dweight = dtype_name(conv.weight.dtype)
    if din not in FLOATS or din != dweight:
        raise NotCovered(f"the convolution template reads an input and weight of one dtype among "
                         f"{', '.join(FLOATS)} (got {din} and {dweight or conv.weight.dtype})")
    return Conv(module=_module_expression(str(node.target)), dims=dims, transposed=transposed,
                in_channels=int(conv.in_channels), out_channels=int(conv.out_channels),
                kernel=tuple(int(k) for k in conv.kernel_size), stride=tuple(int(s) for s in conv.stride),
                padding=_numeric_padding(conv, dims), dilation=tuple(int(d) for d in conv.dilation),
                groups=int(conv.groups),
                output_padding=tuple(int(p) for p in conv.output_padding) if transposed else (0,) * dims,
                has_bias=conv.bias is not None, dtype=din,
                in_shape=tuple(int(s) for s in in_shape), out_shape=tuple(int(s) for s in out_shape))


def describe_convs(gm: fx.GraphModule) -> Description | None:
    """The Description of a traced forward that is only a chain of convolution modules
    applied to one of its inputs; None when the forward computes anything else. Raises
    NotCovered when it is such a chain in a form the template does not take."""
    modules = dict(gm.named_modules())
    nodes = [n for n in gm.graph.nodes if n.op not in ("placeholder", "output")]
    if not nodes or any(n.op != "call_module" or not is_conv_module(modules.get(n.target)) for n in nodes):
        return None
    out = next(n for n in gm.graph.nodes if n.op == "output")
    if out.args[0] is not nodes[-1]:
        return None
    previous = None
    for n in nodes:
        if n.kwargs or len(n.args) != 1 or not isinstance(n.args[0], fx.Node):
            return None
        src = n.args[0]
        if previous is None:
            if src.op != "placeholder" or str(src.target).startswith("*"):
                return None
        elif src is not previous or len(previous.users) != 1:
            return None
        previous = n
    convs = tuple(conv_of(n, modules[n.target]) for n in nodes)
    places = [str(n.target) for n in gm.graph.nodes if n.op == "placeholder"]
    x = str(nodes[0].args[0].target)
    lines = [f"def forward(self, {', '.join(places)}):"]
    for i, c in enumerate(convs):
        lines.append(f"    {x} = self._conv{i}({x}, {c.module}.weight, {c.module}.bias)")
    lines.append(f"    return {x}")
    return Description(regions=(), forward_src="\n".join(lines) + "\n", convs=convs)


def prologue_convs(gm: fx.GraphModule) -> tuple:
    """The Conv of each convolution module that a forward with fused regions calls (one
    per module, in call order); () where there is none, or where the convolution kernels
    do not take one of them (see `conv_of`) or its path is not an attribute name."""
    modules = dict(gm.named_modules())
    found: dict[str, Conv] = {}
    for n in gm.graph.nodes:
        if n.op != "call_module" or not is_conv_module(modules.get(n.target)):
            continue
        if not str(n.target).isidentifier() or n.kwargs or len(n.args) != 1:
            return ()
        if n.target not in found:
            try:
                found[n.target] = conv_of(n, modules[n.target])
            except NotCovered:
                return ()
    return tuple(found.values())
