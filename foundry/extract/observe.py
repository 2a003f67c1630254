"""Run a captured graph once on real inputs and keep what every node produced: the
concrete shapes, dtypes and value statistics (a graph captured with dynamic shapes only
knows symbols), and the values themselves, which region timing and the check of each
written task run on. A value that a later in-place op changes is recorded as it was
before the change."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.fx as fx

from foundry.extract.opkinds import is_inplace
from foundry.extract.values import TensorInfo


@dataclass(frozen=True)
class Observed:
    """`values[name]`: what node `name` produced; `infos[name]`: its TensorInfo (tensor nodes only)."""

    values: dict
    infos: dict

    def info(self, node: fx.Node) -> TensorInfo | None:
        return self.infos.get(node.name)

    def is_tensor(self, node) -> bool:
        return isinstance(node, fx.Node) and node.name in self.infos


def _mutated(gm: fx.GraphModule) -> set:
    """Names of the nodes whose value a later in-place op (`x += p`, `relu_`) changes."""
    modules = dict(gm.named_modules())
    return {n.args[0].name for n in gm.graph.nodes
            if is_inplace(n, modules) and n.args and isinstance(n.args[0], fx.Node)}


class _Recorder(fx.Interpreter):
    def __init__(self, gm: fx.GraphModule):
        super().__init__(gm, garbage_collect_values=False)
        self.seen: dict = {}
        self.mutated = _mutated(gm)

    def run_node(self, n: fx.Node):
        out = super().run_node(n)
        # a value an in-place op changes later is kept as it was here: a region reading it
        # is timed and checked on what it read, not on what the mutation made of it
        self.seen[n.name] = out.clone() if n.name in self.mutated and isinstance(out, torch.Tensor) else out
        return out


def observe(gm: fx.GraphModule, inputs: tuple) -> Observed:
    """Interpret `gm` on `inputs` (no grad) and record every node's value."""
    rec = _Recorder(gm)
    with torch.no_grad():
        rec.run(*inputs)
    infos = {name: TensorInfo.of(v) for name, v in rec.seen.items() if isinstance(v, torch.Tensor)}
    return Observed(values=dict(rec.seen), infos=infos)
