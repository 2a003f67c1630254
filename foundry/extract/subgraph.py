"""A region as a standalone GraphModule: `forward(*inputs, *params)` returns the tuple of
its outputs, computed by the region's own nodes (in-place ops as their functional
versions, leaf modules called with the parameters passed in). Region timing, the check of
a written task and deployment's fallback all run it."""

from __future__ import annotations

import copy

import torch
import torch.fx as fx
import torch.nn as nn
from torch.func import functional_call

from foundry.extract.opkinds import inplace_base, is_aten, is_inplace
from foundry.extract.split import Region, module_params, param_tensor


class LeafCall(nn.Module):
    """A leaf module called with its parameters and buffers given as arguments."""

    def __init__(self, module: nn.Module, names: list[str], n_args: int):
        super().__init__()
        module = copy.copy(module)
        if getattr(module, "inplace", False):
            module.inplace = False
        self.module, self.names, self.n_args = module, list(names), n_args

    def forward(self, *args):
        state = dict(zip(self.names, args[self.n_args:]))
        return functional_call(self.module, state, tuple(args[:self.n_args]))


def _functional(node: fx.Node, modules: dict):
    """(op, target, kwargs) of a node, in-place variants made functional."""
    target, kwargs = node.target, dict(node.kwargs)
    if not is_inplace(node, modules):
        if kwargs.get("inplace"):
            kwargs["inplace"] = False
        return node.op, target, kwargs
    if node.op == "call_function" and is_aten(node):
        packet = getattr(torch.ops.aten, inplace_base(node.target.overloadpacket.__name__))
        return "call_function", getattr(packet, str(node.target).rsplit(".", 1)[-1]), kwargs
    if node.op == "call_method":
        return "call_method", inplace_base(str(target)), kwargs
    if node.op == "call_function":
        return "call_function", getattr(torch, inplace_base(target.__name__), target), kwargs
    return node.op, target, kwargs


def region_module(gm: fx.GraphModule, region: Region) -> fx.GraphModule:
    """The region's nodes as a GraphModule of `(*inputs, *params) -> tuple(outputs)`."""
    modules = dict(gm.named_modules())
    by_name = {n.name: n for n in gm.graph.nodes}
    graph = fx.Graph()
    env: dict = {}
    for name in region.inputs:
        env[by_name[name]] = graph.placeholder(name)
    params = {p: graph.placeholder("p_" + p.replace(".", "_")) for p in region.params}
    root = nn.Module()
    for i, name in enumerate(region.nodes):
        node = by_name[name]

        def arg(a):
            return params[a.target] if a.op == "get_attr" else env[a]
        args = fx.node.map_arg(node.args, arg)
        op, target, kwargs = _functional(node, modules)
        kwargs = fx.node.map_arg(kwargs, arg)
        if op == "call_module":
            names = module_params(gm, node.target)
            leaf = f"leaf{i}"
            root.add_module(leaf, LeafCall(modules[node.target], [p[len(node.target) + 1:] for p in names],
                                           len(args)))
            env[node] = graph.call_module(leaf, tuple(args) + tuple(params[p] for p in names), kwargs)
        elif op == "call_method":
            env[node] = graph.call_method(target, tuple(args), kwargs)
        else:
            env[node] = graph.call_function(target, tuple(args), kwargs)
    graph.output(tuple(env[by_name[o]] for o in region.outputs))
    return fx.GraphModule(root, graph, class_name="Region")


def region_arguments(gm: fx.GraphModule, region: Region, values: dict) -> tuple:
    """The arguments of `region_module` from one run's node values (inputs, then params)."""
    return tuple(values[n] for n in region.inputs) + tuple(param_tensor(gm, p) for p in region.params)
