"""The records islands hand out: insert statuses, elites, history entries, stats.

`fitness_of` is the ranking every island uses: the fitness ladder of
`EvalResult.fitness` (stage 0..4 for failures, 5 + speedup for correct kernels), with
one repair: a correct result without a measured speedup ranks 5.0, never as a failure.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from foundry.types import Candidate, EvalResult, Stage


class InsertStatus(str, enum.Enum):
    """What happened to a candidate offered to an archive or island."""

    NEW = "new"  # it filled an empty cell
    IMPROVED = "improved"  # it beat the cell's elite and replaced it
    REJECTED = "rejected"  # the cell's elite is at least as fit (or it has no code)
    DUPLICATE = "duplicate"  # an immigrant whose content this island already holds


def fitness_of(result: EvalResult) -> float:
    """The archive's fitness for `result` (higher is better; a correct kernel always
    outranks an incorrect one). Raises ValueError for a non-finite or negative value."""
    if result.correct and result.speedup_eager is None:
        value = float(Stage.CORRECT)
    else:
        value = result.fitness
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"candidate {result.candidate_id}: fitness must be finite and "
                         f"non-negative, got {value!r} (speedup_eager="
                         f"{result.speedup_eager!r})")
    return value


@dataclass(frozen=True, slots=True)
class Elite:
    """A candidate held by an archive: the best ever inserted in its `cell`.

    `generation`: the island's generation when it was inserted. `is_migrant`: it came
    from another island (it never migrates again). `home_island`: where it was born.
    """

    candidate: Candidate
    result: EvalResult
    cell: tuple
    fitness: float
    generation: int = 0
    is_migrant: bool = False
    home_island: int = 0

    @property
    def candidate_id(self) -> str:
        return self.candidate.candidate_id

    @property
    def correct(self) -> bool:
        return bool(self.result.correct)


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One candidate an island evaluated or received, failures included."""

    candidate: Candidate
    result: EvalResult
    cell: tuple
    fitness: float
    generation: int
    status: InsertStatus
    is_migrant: bool = False
    home_island: int = 0

    def as_elite(self) -> Elite:
        return Elite(candidate=self.candidate, result=self.result, cell=self.cell,
                     fitness=self.fitness, generation=self.generation,
                     is_migrant=self.is_migrant, home_island=self.home_island)


@dataclass(frozen=True)
class ArchiveStats:
    """coverage: occupied / total cells. qd_score: sum of elite fitness. best_fitness:
    None while empty. inserts/new/improved/rejected: counts of insert outcomes."""

    num_cells: int
    occupied: int
    coverage: float
    qd_score: float
    best_fitness: float | None
    num_correct: int
    inserts: int
    new: int
    improved: int
    rejected: int
