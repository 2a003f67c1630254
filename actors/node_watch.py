"""Nodes that left or joined the cluster since the last look (pure: the driver passes in
what `ray.nodes()` says, as `actors.placement.ClusterNode`s)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from actors.placement import ClusterNode

LOST, ADDED = "lost", "added"


@dataclass(frozen=True)
class NodeEvent:
    kind: str  # LOST | ADDED
    node: ClusterNode
    at_s: float  # seconds since the run's start


class NodeWatch:
    def __init__(self, nodes: Iterable[ClusterNode]):
        self.alive = {n.node_id: n for n in nodes if n.alive}
        self.events: list[NodeEvent] = []

    def update(self, nodes: Iterable[ClusterNode], *, at_s: float) -> list[NodeEvent]:
        """The nodes lost and added since the last update (a node seen dead, or not listed
        any more, is lost)."""
        now = {n.node_id: n for n in nodes if n.alive}
        events = [NodeEvent(LOST, n, at_s) for i, n in self.alive.items() if i not in now]
        events += [NodeEvent(ADDED, n, at_s) for i, n in now.items() if i not in self.alive]
        self.alive = now
        self.events += events
        return events
