"""Where the runtime's actors go on a Ray cluster (pure, no Ray calls: the driver passes
in what `ray.nodes()` says, so this is tested on plain records).

- Evaluators: one per GPU of every alive node, each pinned to its node (a node added
  later gets its own; with `ray.max_gpu_evaluators` below the GPU count, round-robin over
  the nodes); on a cluster without GPUs, `ray.cpu_evaluators` wherever Ray puts them.
- Islands: spread round-robin over the alive nodes, the driver's node first, each pinned
  to its node (`actors.cluster_care` starts an island whose node is lost again on another).
- The driver's bookkeeping (dispatcher, prompt evolver, shared template engine): pinned to
  the driver's node (they cost no GPU, and losing a worker node must not take them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping


@dataclass(frozen=True)
class ClusterNode:
    """One Ray node as the runtime sees it."""

    node_id: str
    address: str  # ip:port of its raylet, which tells nodes of one machine apart
    gpus: int
    cpus: float
    head: bool
    alive: bool

    @property
    def label(self) -> str:
        """A short name for logs and reports: its raylet's address and the start of its id."""
        return f"{self.address} ({self.node_id[:8]})"

    def as_row(self) -> dict:
        return {"node_id": self.node_id, "address": self.address, "label": self.label, "gpus": self.gpus,
                "cpus": self.cpus, "head": self.head, "alive": self.alive}


def nodes_from_ray(rows: Iterable[Mapping[str, Any]]) -> list[ClusterNode]:
    """`ray.nodes()` rows as ClusterNodes, in a stable order (head first, then by address)."""
    nodes = []
    for row in rows:
        resources = row.get("Resources") or {}
        nodes.append(ClusterNode(
            node_id=str(row.get("NodeID", "")),
            address=f"{row.get('NodeManagerAddress', '')}:{row.get('NodeManagerPort', '')}",
            gpus=int(resources.get("GPU", 0) or 0), cpus=float(resources.get("CPU", 0) or 0),
            head="node:__internal_head__" in resources or bool(row.get("IsHeadNode")),
            alive=bool(row.get("Alive", row.get("alive", False)))))
    return sorted(nodes, key=lambda n: (not n.head, n.address, n.node_id))


@dataclass(frozen=True)
class EvaluatorSlot:
    """Where one evaluator goes: `node_id` None lets Ray choose (CPU evaluators)."""

    name: str
    node_id: str | None
    gpu: bool


def gpu_evaluator_slots(nodes: Iterable[ClusterNode], *, start: int = 0, limit: int | None = None,
                        taken: Mapping[str, int] | None = None) -> list[EvaluatorSlot]:
    """One slot per GPU of every alive node not already served (`taken`: node id -> its
    evaluators so far), named evaluator-<start>, evaluator-<start+1>, ...; at most
    `limit` in all (None: every GPU). Round-robin over the nodes (a GPU of each node, then
    a second of each, ...), so that fewer evaluators than GPUs spread over the nodes."""
    taken = dict(taken or {})
    free = {n.node_id: max(0, n.gpus - taken.get(n.node_id, 0)) for n in nodes if n.alive}
    order = [node_id for node_id in free]
    slots: list[EvaluatorSlot] = []
    while any(free.values()):
        for node_id in order:
            if not free[node_id]:
                continue
            if limit is not None and len(slots) >= limit:
                return slots
            free[node_id] -= 1
            slots.append(EvaluatorSlot(name=f"evaluator-{start + len(slots)}", node_id=node_id, gpu=True))
    return slots


def cpu_evaluator_slots(count: int) -> list[EvaluatorSlot]:
    return [EvaluatorSlot(name=f"evaluator-{k}", node_id=None, gpu=False) for k in range(count)]


def island_nodes(count: int, nodes: Iterable[ClusterNode], *, driver_node: str) -> dict[int, str]:
    """Island index -> the node it starts on: round-robin over the alive nodes, starting
    with the driver's."""
    alive = [n.node_id for n in nodes if n.alive]
    order = [driver_node] + [n for n in alive if n != driver_node] if driver_node in alive else alive
    if not order:
        order = [driver_node]
    return {i: order[i % len(order)] for i in range(count)}
