"""Migration: where each island's emigrants go, and one in-process migration round.

Topologies: "ring" (i -> i+1), "bidirectional_ring" (i -> i-1 and i+1), "all_to_all"
(i -> every other island), "none". An island sends when `Island.migration_due()`
(every `migration_interval` of its own generations); what it sends is
`Island.emigrants()` (its top `migration_fraction` of non-migrant elites, each sent at
most once) and each receiver applies its own insert rules in `Island.immigrate`
(copies deduplicated by content hash, marked as migrants so they never migrate again).
A Ray runtime calls the same three methods on its island actors.
"""

from __future__ import annotations

from typing import Sequence

from islands.config import TOPOLOGIES
from islands.island import Island
from islands.records import InsertStatus


class Topology:
    """Destinations of each island's emigrants among `count` islands."""

    def __init__(self, *, kind: str, count: int):
        if kind not in TOPOLOGIES:
            raise ValueError(f"unknown migration topology {kind!r}; known: "
                             f"{', '.join(TOPOLOGIES)}")
        if count < 1:
            raise ValueError(f"island count must be at least 1, got {count}")
        self.kind = kind
        self.count = count

    def targets(self, *, source: int) -> tuple[int, ...]:
        if not 0 <= source < self.count:
            raise ValueError(f"island {source} is not in 0..{self.count - 1}")
        n = self.count
        if n == 1 or self.kind == "none":
            return ()
        if self.kind == "ring":
            return ((source + 1) % n,)
        if self.kind == "bidirectional_ring":
            return tuple(dict.fromkeys(((source + 1) % n, (source - 1) % n)))
        return tuple(i for i in range(n) if i != source)


def migrate_due(*, islands: Sequence[Island], topology: Topology) -> dict[int, list]:
    """One round in one process: every island whose migration is due sends its
    emigrants to its targets. Returns {receiving island id: [InsertStatus, ...]}.
    Islands are addressed by position, which must equal their island_id."""
    for pos, island in enumerate(islands):
        if island.island_id != pos:
            raise ValueError(f"island at position {pos} has island_id {island.island_id}")
    if topology.count != len(islands):
        raise ValueError(f"topology is for {topology.count} islands, got {len(islands)}")
    outgoing = {i.island_id: i.emigrants() for i in islands if i.migration_due()}
    received: dict[int, list[InsertStatus]] = {}
    for source, elites in outgoing.items():
        if not elites:
            continue
        for target in topology.targets(source=source):
            received.setdefault(target, []).extend(islands[target].immigrate(elites=elites))
    return received
