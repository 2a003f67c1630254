"""`Ledger`: the dispatcher's copy of every finished evaluation until the driver has it.

An island keeps its evaluated children in an outbox the driver drains every poll; an
island process killed between an evaluation and the next drain would take those records
with it, and the candidates it had in flight would be evaluated for nobody. So the
dispatcher (which outlives islands) also files each finished evaluation here, keyed by
the submitting island incarnation ("origin") and the submitted candidate's id. The
driver claims what it drained; when it sees an island die it marks that island's
origins dead, and their entries, now and when later ones finish, become orphans the
driver logs itself. Pure Python (no Ray), so it is tested directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from foundry.types import Candidate, EvalResult


@dataclass(frozen=True)
class Settled:
    """One finished evaluation as the island would log it."""

    island_index: int
    candidate: Candidate  # the submitted child, with tuned params when tuning changed them
    result: EvalResult
    evaluator: str
    submitted_id: str = ""  # the id the island submitted (tuning may have changed the candidate's)


class Ledger:
    def __init__(self) -> None:
        self._open: dict[tuple[str, str], Settled] = {}
        self._origins: dict[int, set[str]] = {}
        self._dead: set[str] = set()

    def __len__(self) -> int:
        return len(self._open)

    def seen(self, *, origin: str, island_index: int) -> None:
        """An island incarnation submitted something (call before its evaluation ends)."""
        self._origins.setdefault(island_index, set()).add(origin)

    def file(self, *, origin: str, submitted_id: str, settled: Settled) -> None:
        self._open[(origin, submitted_id)] = settled

    def claim(self, *, origin: str, submitted_ids: Iterable[str]) -> int:
        """The driver has these from the island itself; returns how many were open."""
        return sum(self._open.pop((origin, i), None) is not None for i in submitted_ids)

    def mark_dead(self, *, island_index: int) -> int:
        """Every incarnation of the island seen so far is gone; returns how many."""
        gone = self._origins.pop(island_index, set())
        self._dead |= gone
        return len(gone)

    def take_orphans(self, *, every_origin: bool = False) -> list[Settled]:
        """Finished evaluations of dead incarnations (of every incarnation, when the run
        is stopping and will drain no island again), removed from the ledger."""
        keys = [k for k in self._open if every_origin or k[0] in self._dead]
        return [self._open.pop(k) for k in keys]
