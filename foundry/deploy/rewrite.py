"""Replace a region's nodes in a captured graph by one call of its custom op (then one
item per output), and keep the graph in a valid order."""

from __future__ import annotations

import operator

import torch.fx as fx

from foundry.extract.split import Region


def _param_node(graph: fx.Graph, path: str, existing: dict, before: fx.Node) -> fx.Node:
    if path not in existing:
        with graph.inserting_before(before):
            existing[path] = graph.get_attr(path)
    return existing[path]


def toposort(graph: fx.Graph) -> None:
    """Reorder `graph` so every node comes after its inputs, moving as little as needed
    (depth-first over inputs, in the existing order)."""
    order: list = []
    placed: set = set()
    for root in list(graph.nodes):
        stack = [(root, False)]
        while stack:
            node, ready = stack.pop()
            if node in placed:
                continue
            if ready:
                placed.add(node)
                order.append(node)
                continue
            stack.append((node, True))
            stack.extend((a, False) for a in reversed(node.all_input_nodes) if a not in placed)
    for prev, node in zip(order, order[1:]):
        if prev.next is not node:
            prev.append(node)


def replace_region(gm: fx.GraphModule, region: Region, op, renamed: dict) -> fx.Node:
    """Swap `region`'s nodes in `gm` for `op([*inputs, *params])`; returns the call node.
    `renamed` maps the names of outputs of regions replaced before to the nodes that stand
    for them now (updated with this region's)."""
    graph = gm.graph
    by_name = {n.name: n for n in graph.nodes}
    by_name.update(renamed)
    nodes = [by_name[n] for n in region.nodes]
    members = set(nodes)
    params = {n.target: n for n in graph.nodes if n.op == "get_attr"}
    first = next(n for n in graph.nodes if n in members)
    args = [by_name[n] for n in region.inputs] + [_param_node(graph, p, params, first) for p in region.params]
    with graph.inserting_before(nodes[-1]):
        call = graph.call_function(op, (args,))
        items = [graph.call_function(operator.getitem, (call, i)) for i in range(len(region.outputs))]
    for name, item in zip(region.outputs, items):
        by_name[name].replace_all_uses_with(item, delete_user_cb=lambda user: user not in members)
        renamed[name] = item
    for node in reversed(nodes):
        graph.erase_node(node)
    toposort(graph)
    return call
