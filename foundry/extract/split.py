"""Split a captured graph into regions worth a kernel.

Walking the graph in order, each eligible node (an anchor: matmul, convolution,
attention, norm, embedding, a recurrent layer; or a pointwise / reduction op) joins the
regions of the nodes it reads when the union still holds at most one anchor and stays
convex (no path leaves it and comes back, so it can be replaced by one call); otherwise it
starts a region. So an anchor collects the pointwise and reduction chain around it, and a
chain between anchors goes with the first. A recurrent layer returns a tuple (output,
h_n[, c_n]): the items taken from it join its region. Views, other tuple items, constants
and nodes that read symbolic sizes stay outside. A region's structure key (ops, constants,
wiring, input and parameter shapes and dtypes) is the same for repeated regions, which
become one task."""

from __future__ import annotations

import hashlib
import operator
from dataclasses import dataclass

import torch
import torch.fx as fx
import torch.nn as nn

from foundry.extract.observe import Observed
from foundry.extract.opkinds import TRIVIAL, callable_path, flat_nodes, is_anchor, is_aten, is_inplace, kind_of, op_name

MAX_LABEL_PARTS = 4


@dataclass(frozen=True)
class Region:
    """Nodes (graph order) replaced by one kernel. `inputs`: the activation nodes it reads
    (order of first use); `params`: the parameters and buffers it reads, by their path in
    the model; `outputs`: its nodes used after it."""

    nodes: tuple
    anchor: str  # the anchor node's name, "" for a standalone chain
    label: str  # e.g. "linear_gelu"
    inputs: tuple
    params: tuple
    outputs: tuple
    key: str  # structure key: equal for regions that are one task


def module_params(gm: fx.GraphModule, target: str) -> list[str]:
    """Paths of the parameters and buffers of leaf module `target` (a torch.fx call_module)."""
    mod = gm.get_submodule(target)
    return [f"{target}.{n}" for n, _ in list(mod.named_parameters()) + list(mod.named_buffers())]


def node_params(gm: fx.GraphModule, node: fx.Node) -> list[str]:
    """Parameter paths a node reads: its get_attr arguments, or a leaf module's own."""
    out = [a.target for a in flat_nodes((node.args, node.kwargs)) if a.op == "get_attr"]
    if node.op == "call_module":
        out += module_params(gm, node.target)
    return out


def _tensors(value) -> bool:
    """Whether `value` is a (nested) tuple or list of tensors."""
    return isinstance(value, (tuple, list)) and bool(value) and all(
        isinstance(v, torch.Tensor) or _tensors(v) for v in value)


def _produces(node: fx.Node, kind: str, obs: Observed) -> bool:
    """Whether the node's value can be a region's: a tensor, or for a recurrent layer the
    tuple of tensors it returns (its items then join its region)."""
    if obs.is_tensor(node):
        return True
    return kind == "recurrent" and _tensors(obs.values.get(node.name))


def _item_of(node: fx.Node, obs: Observed, region_of: dict):
    """The region id a `getitem` of a tuple-valued region member joins, else None."""
    if node.op != "call_function" or node.target is not operator.getitem or not node.args:
        return None
    src = node.args[0]
    if not isinstance(src, fx.Node) or src not in region_of or obs.is_tensor(src):
        return None
    return region_of[src]


def _eligible(node: fx.Node, kind: str, obs: Observed, modules: dict) -> bool:
    if kind == "other" or not _produces(node, kind, obs):
        return False
    for a in flat_nodes((node.args, node.kwargs)):
        if a.op != "get_attr" and not obs.is_tensor(a):
            return False  # a symbolic size, a tuple, ...: the region could not stand alone
    if node.op == "call_function" and not is_aten(node) and callable_path(node.target) is None:
        return False
    if is_inplace(node, modules):
        base = node.args[0] if node.args else None
        if not isinstance(base, fx.Node) or base.op in ("get_attr", "placeholder") or len(base.users) != 1:
            return False  # the mutation is seen elsewhere: not a pure function of its inputs
    return True


def _ancestors(graph: fx.Graph) -> dict:
    """node -> bitset (int) of itself and every node it depends on."""
    index = {n: i for i, n in enumerate(graph.nodes)}
    anc: dict = {}
    for n in graph.nodes:
        bits = 1 << index[n]
        for a in n.all_input_nodes:
            bits |= anc[a]
        anc[n] = bits
    return {n: (bits, index[n]) for n, bits in anc.items()}


def _convex(members: set, anc: dict) -> bool:
    mask = 0
    for m in members:
        mask |= 1 << anc[m][1]
    for m in members:
        for a in m.all_input_nodes:
            if a not in members and anc[a][0] & mask:
                return False
    return True


def _grow(gm: fx.GraphModule, obs: Observed) -> tuple[list, dict]:
    modules = dict(gm.named_modules())
    anc = _ancestors(gm.graph)
    region_of: dict = {}
    groups: dict[int, list] = {}
    kinds: dict = {}
    next_id = 0
    for n in gm.graph.nodes:
        item = _item_of(n, obs, region_of)
        if item is not None:  # an item of a recurrent layer's (output, h_n, ...): it goes with the layer
            kinds[n] = "item"
            groups[item].append(n)
            region_of[n] = item
            continue
        kind = kind_of(n, modules)
        if not _eligible(n, kind, obs, modules):
            continue
        kinds[n] = kind
        members = {n}
        anchors = int(is_anchor(kind))
        chosen = []
        for a in n.all_input_nodes:
            rid = region_of.get(a)
            if rid is None or rid in chosen:
                continue
            g_anchors = sum(is_anchor(kinds[m]) for m in groups[rid])
            trial = members | set(groups[rid])
            if anchors + g_anchors <= 1 and _convex(trial, anc):
                members, anchors = trial, anchors + g_anchors
                chosen.append(rid)
        rid = next_id
        next_id += 1
        groups[rid] = [m for g in chosen for m in groups.pop(g)] + [n]
        for m in groups[rid]:
            region_of[m] = rid
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    return [sorted(g, key=order.__getitem__) for _, g in sorted(groups.items())], kinds


def _constant(v) -> str:
    return repr(v)


def structure_key(gm: fx.GraphModule, nodes: list, inputs: list, params: list, obs: Observed) -> str:
    """A hash of the region's ops, constants, wiring and input/parameter signatures."""
    modules = dict(gm.named_modules())
    local = {n: f"%{i}" for i, n in enumerate(nodes)}
    local.update({n: f"in{i}" for i, n in enumerate(inputs)})
    parts = [f"in{i}:{obs.info(n).shape}:{obs.info(n).dtype}" for i, n in enumerate(inputs)]
    parts += [f"p:{tuple(gm.get_parameter(p).shape) if _is_param(gm, p) else tuple(gm.get_buffer(p).shape)}:"
              f"{(gm.get_parameter(p) if _is_param(gm, p) else gm.get_buffer(p)).dtype}" for p in params]

    def ref(a):
        if isinstance(a, fx.Node):
            return local.get(a, f"param:{params.index(a.target)}" if a.op == "get_attr" else "?")
        return a
    for n in nodes:
        target = str(n.target) if n.op != "call_module" else repr(modules[n.target])
        args = fx.node.map_aggregate((n.args, n.kwargs), ref)
        parts.append(f"{n.op}:{target}:{_constant(args)}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _is_param(gm: fx.GraphModule, path: str) -> bool:
    try:
        gm.get_parameter(path)
        return True
    except AttributeError:
        return False


def param_tensor(gm: nn.Module, path: str):
    """The parameter or buffer at `path`."""
    return gm.get_parameter(path) if _is_param(gm, path) else gm.get_buffer(path)


def _label(nodes: list, modules: dict) -> str:
    names = []
    for n in nodes:
        name = op_name(n, modules) or n.op
        if name not in names:
            names.append(name)
    return "_".join(names[:MAX_LABEL_PARTS]) + ("_etc" if len(names) > MAX_LABEL_PARTS else "")


def split(gm: fx.GraphModule, obs: Observed) -> tuple[Region, ...]:
    """The regions of a captured graph, in graph order."""
    modules = dict(gm.named_modules())
    groups, kinds = _grow(gm, obs)
    out = []
    for nodes in groups:
        if all(op_name(n, modules) in TRIVIAL for n in nodes):
            continue
        members = set(nodes)
        inputs: list = []
        params: list = []
        for n in nodes:
            for a in flat_nodes((n.args, n.kwargs)):
                if a in members:
                    continue
                if a.op == "get_attr":
                    if a.target not in params:
                        params.append(a.target)
                elif a not in inputs:
                    inputs.append(a)
            if n.op == "call_module":
                params += [p for p in module_params(gm, n.target) if p not in params]
        if not inputs:
            continue  # computed from parameters alone: constant at inference
        outputs = [n for n in nodes if any(u not in members for u in n.users)]
        if not outputs:
            continue  # nothing reads what it computes (an unused attention-weight average, say): no task
        if not all(obs.is_tensor(n) for n in outputs):
            continue  # a tuple leaves the region whole: no task returns it as a tensor
        anchor = next((n.name for n in nodes if is_anchor(kinds[n])), "")
        out.append(Region(nodes=tuple(n.name for n in nodes), anchor=anchor, label=_label(nodes, modules),
                          inputs=tuple(a.name for a in inputs), params=tuple(params),
                          outputs=tuple(n.name for n in outputs),
                          key=structure_key(gm, nodes, inputs, params, obs)))
    return tuple(out)
