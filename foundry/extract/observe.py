"""Run a captured graph on real inputs and keep what its nodes produced: the concrete
shapes, dtypes and value statistics of every tensor (a graph captured with dynamic
shapes only knows symbols), and the values themselves where they are needed, which region
timing and the check of each written task run on. A value that a later in-place op changes
is recorded as it was before the change.

Two runs, so that extraction holds about what the forward itself holds: `observe` keeps
every node's TensorInfo but no tensor (each is let go after its last use, as in the
forward), and the non-tensor values (a recurrent layer's tuple, say); `with_values`, once
the regions are known, runs the graph again and keeps only the tensors named (the
regions' inputs and outputs). Keeping every intermediate made extraction need several
times the forward's memory (an attention over 16384 positions asked for 48 GiB more on an
80 GB GPU)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.fx as fx

from foundry.extract.opkinds import is_inplace
from foundry.extract.values import TensorInfo


@dataclass(frozen=True)
class Observed:
    """`values[name]`: what node `name` produced (after `observe`, only the non-tensor
    values; after `with_values`, the tensors asked for too); `infos[name]`: its TensorInfo
    (tensor nodes only)."""

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
    """Records the TensorInfo of every tensor node, the non-tensor values, and the tensors
    of the nodes named in `keep` (None: no tensor)."""

    def __init__(self, gm: fx.GraphModule, keep: frozenset | None, *, describe: bool):
        super().__init__(gm, garbage_collect_values=True)
        self.keep = keep or frozenset()
        self.describe = describe
        self.values: dict = {}
        self.infos: dict = {}
        self.mutated = _mutated(gm)

    def run_node(self, n: fx.Node):
        out = super().run_node(n)
        if isinstance(out, torch.Tensor):
            if self.describe:  # measured now: an in-place op later may change the tensor
                self.infos[n.name] = TensorInfo.of(out)
            if n.name in self.keep:
                # a value an in-place op changes later is kept as it was here: a region reading
                # it is timed and checked on what it read, not on what the mutation made of it
                self.values[n.name] = out.clone() if n.name in self.mutated else out
        else:
            self.values[n.name] = out
        return out


def _run(gm: fx.GraphModule, inputs: tuple, keep: frozenset | None, *, describe: bool) -> _Recorder:
    rec = _Recorder(gm, keep, describe=describe)
    with torch.no_grad():
        rec.run(*inputs)
    return rec


def observe(gm: fx.GraphModule, inputs: tuple) -> Observed:
    """Interpret `gm` on `inputs` (no grad): every tensor's TensorInfo, the non-tensor values."""
    rec = _run(gm, inputs, None, describe=True)
    return Observed(values=dict(rec.values), infos=dict(rec.infos))


def with_values(gm: fx.GraphModule, inputs: tuple, names, described: Observed) -> Observed:
    """Interpret `gm` on `inputs` again, keeping the tensors of the nodes in `names` too;
    the descriptions are `described`'s (what `observe` made of the same run)."""
    rec = _run(gm, inputs, frozenset(names), describe=False)
    return Observed(values=dict(rec.values), infos=dict(described.infos))
