"""Parent and inspiration selection for one island.

A parent is chosen by one of three modes, drawn with the configured weights (paper
defaults 0.2 / 0.7 / 0.1):
- exploration: uniform over the archive's occupied cells (diversity);
- exploitation: softmax over elite fitness (temperature from config);
- random: uniform over everything the island has evaluated or received, failures
  included (a failed parent leads to a repair request).
Inspirations are other elites of the same archive, from cells other than the parent's,
drawn without replacement with weight (1 + sum of the cell's levels) x (2 if correct),
so higher levels are preferred.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Sequence

from islands.archive import Archive
from islands.records import Elite, HistoryEntry

MODES = ("exploration", "exploitation", "random")
NUM_LEVEL_AXES = 3


@dataclass(frozen=True)
class Selection:
    """The chosen parent and the mode that chose it."""

    parent: Elite
    mode: str  # one of MODES


class ParentSelector:
    """Draws parents and inspirations from an archive with the given mode weights."""

    def __init__(self, *, weights: tuple[float, float, float], temperature: float):
        if len(weights) != 3 or any(w < 0 for w in weights) or sum(weights) <= 0:
            raise ValueError(f"selection weights must be three non-negative numbers with a "
                             f"positive sum, got {weights!r}")
        if temperature <= 0:
            raise ValueError(f"softmax temperature must be positive, got {temperature!r}")
        total = float(sum(weights))
        self.weights = tuple(w / total for w in weights)
        self._cum = [sum(self.weights[:i + 1]) for i in range(3)]
        self.temperature = float(temperature)

    def choose_mode(self, *, rng: random.Random) -> str:
        u = rng.random()
        for mode, c in zip(MODES, self._cum):
            if u < c:
                return mode
        return next(m for m, w in zip(reversed(MODES), reversed(self.weights)) if w > 0)

    def select(self, *, archive: Archive, history: Sequence[HistoryEntry],
               rng: random.Random) -> Selection | None:
        """A parent, or None when the archive is empty (translate from the reference).
        `history`: the entries the random mode draws from (those with code)."""
        if len(archive) == 0:
            return None
        mode = self.choose_mode(rng=rng)
        if mode == "exploration":
            parent = archive.sample_uniform(rng=rng)
        elif mode == "exploitation":
            parent = archive.sample_softmax(rng=rng, temperature=self.temperature)
        else:
            parent = history[rng.randrange(len(history))].as_elite() if history else \
                archive.sample_uniform(rng=rng)
        assert parent is not None
        return Selection(parent=parent, mode=mode)

    @staticmethod
    def inspirations(*, archive: Archive, parent: Elite | None, k: int,
                     rng: random.Random) -> list[Elite]:
        """Up to `k` elites of `archive` from cells other than the parent's."""
        if k <= 0:
            return []
        exclude_cell = parent.cell if parent is not None else None
        exclude_id = parent.candidate_id if parent is not None else None
        pool = [e for e in archive.elites()
                if e.cell != exclude_cell and e.candidate_id != exclude_id]
        weights = [(1.0 + sum(e.cell[:NUM_LEVEL_AXES])) * (2.0 if e.correct else 1.0)
                   for e in pool]
        chosen: list[Elite] = []
        while pool and len(chosen) < k:
            i = rng.choices(range(len(pool)), weights=weights, k=1)[0]
            chosen.append(pool.pop(i))
            weights.pop(i)
        return chosen

