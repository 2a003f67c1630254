"""Archive: a MAP-Elites archive over fixed bins.

One elite per cell, always the fittest candidate ever inserted there (ties keep the
incumbent, so an elite is replaced only by a strictly fitter one). Cells are never
emptied, so coverage and the QD-score (sum of elite fitness, every fitness >= 0) never
decrease. Each cell keeps its history: every insert attempt as
(insert index, candidate id, fitness, status).
"""

from __future__ import annotations

import math
import random
from typing import Any, Mapping

from foundry.types import Candidate, EvalResult
from islands.bins import Bins
from islands.records import ArchiveStats, Elite, InsertStatus, fitness_of


class Archive:
    """A MAP-Elites archive over `bins`."""

    def __init__(self, *, bins: Bins):
        self.bins = bins
        self._elites: dict[tuple, Elite] = {}
        self._order: list[tuple] = []  # occupied cells in the order they were first filled
        self._cell_log: dict[tuple, list[tuple]] = {}
        self._counts = {"inserts": 0, "new": 0, "improved": 0, "rejected": 0}
        self._softmax_cache: tuple | None = None
        self.version = 0  # bumped on every change of an elite (for callers' caches)

    # -- inserting -------------------------------------------------------------------
    def insert(self, *, candidate: Candidate, result: EvalResult, cell: tuple,
               generation: int = 0, is_migrant: bool = False,
               home_island: int | None = None) -> InsertStatus:
        """Offer a candidate for `cell`; returns NEW, IMPROVED or REJECTED."""
        if result.candidate_id != candidate.candidate_id:
            raise ValueError(f"result is for candidate {result.candidate_id}, not "
                             f"{candidate.candidate_id}")
        cell = self.bins.check_cell(cell)
        fitness = fitness_of(result)
        self._counts["inserts"] += 1
        current = self._elites.get(cell)
        if current is not None and fitness <= current.fitness:
            status = InsertStatus.REJECTED
        else:
            status = InsertStatus.NEW if current is None else InsertStatus.IMPROVED
            elite = Elite(candidate=candidate, result=result, cell=cell, fitness=fitness,
                          generation=generation, is_migrant=is_migrant,
                          home_island=candidate.island_id if home_island is None
                          else home_island)
            self._place(elite)
        self._counts[status.value] += 1
        self._cell_log.setdefault(cell, []).append(
            (self._counts["inserts"] - 1, candidate.candidate_id, fitness, status.value))
        return status

    def _place(self, elite: Elite) -> None:
        current = self._elites.get(elite.cell)
        if current is None:
            self._order.append(elite.cell)
        self._elites[elite.cell] = elite
        self.version += 1

    # -- reading ---------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._elites)

    def __contains__(self, cell: object) -> bool:
        return cell in self._elites

    def get(self, cell: tuple) -> Elite | None:
        return self._elites.get(tuple(cell))

    def elites(self) -> list[Elite]:
        """All elites, in the order their cells were first filled."""
        return [self._elites[c] for c in self._order]

    def best(self) -> Elite | None:
        """The fittest elite (ties: the earliest-filled cell)."""
        best = None
        for c in self._order:
            e = self._elites[c]
            if best is None or e.fitness > best.fitness:
                best = e
        return best

    def top(self, *, count: int, include_migrants: bool = True) -> list[Elite]:
        """The `count` fittest elites, fittest first (ties: earlier-filled cell first)."""
        pool = [e for e in self.elites() if include_migrants or not e.is_migrant]
        return sorted(pool, key=lambda e: -e.fitness)[:max(0, count)]

    def cell_history(self, cell: tuple) -> list[tuple]:
        """Every insert attempt on `cell`: (insert index, candidate id, fitness, status)."""
        return list(self._cell_log.get(tuple(cell), ()))

    def sample_uniform(self, *, rng: random.Random) -> Elite | None:
        """One elite, every occupied cell equally likely."""
        if not self._order:
            return None
        return self._elites[self._order[rng.randrange(len(self._order))]]

    def sample_softmax(self, *, rng: random.Random, temperature: float) -> Elite | None:
        """One elite, with probability proportional to exp(fitness / temperature)."""
        if not self._order:
            return None
        elites, cum = self._softmax_table(temperature)
        return rng.choices(elites, cum_weights=cum, k=1)[0]

    def softmax_probabilities(self, *, temperature: float) -> dict[tuple, float]:
        elites, cum = self._softmax_table(temperature)
        total = cum[-1] if cum else 1.0
        prev = 0.0
        out = {}
        for e, c in zip(elites, cum):
            out[e.cell] = (c - prev) / total
            prev = c
        return out

    def _softmax_table(self, temperature: float) -> tuple[list[Elite], list[float]]:
        key = (self.version, temperature)
        cached = self._softmax_cache
        if cached is not None and cached[0] == key:
            return cached[1], cached[2]
        elites = self.elites()
        top = max(e.fitness for e in elites) if elites else 0.0
        cum, acc = [], 0.0
        for e in elites:
            acc += math.exp((e.fitness - top) / temperature)
            cum.append(acc)
        self._softmax_cache = (key, elites, cum)
        return elites, cum

    def stats(self) -> ArchiveStats:
        n = self.bins.num_cells
        best = self.best()
        return ArchiveStats(
            num_cells=n, occupied=len(self._elites), coverage=len(self._elites) / n,
            qd_score=self.qd_score(), best_fitness=best.fitness if best else None,
            num_correct=sum(1 for e in self._elites.values() if e.correct),
            inserts=self._counts["inserts"], new=self._counts["new"],
            improved=self._counts["improved"], rejected=self._counts["rejected"])

    def qd_score(self) -> float:
        """Sum of elite fitness (recomputed exactly, not from the running total)."""
        return math.fsum(e.fitness for e in self._elites.values())

    # -- checkpoint state ------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "bins": self.bins.to_dict(),
            "elites": [{"candidate": e.candidate.to_row(), "result": e.result.to_row(),
                        "cell": list(e.cell), "fitness": e.fitness,
                        "generation": e.generation, "is_migrant": e.is_migrant,
                        "home_island": e.home_island} for e in self.elites()],
            "cell_log": [[list(c), [list(t) for t in log]]
                         for c, log in self._cell_log.items()],
            "counts": dict(self._counts),
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> "Archive":
        archive = cls(bins=Bins.from_dict(state["bins"]))
        for d in state["elites"]:
            archive._place(Elite(
                candidate=Candidate.from_row(d["candidate"]),
                result=EvalResult.from_row(d["result"]),
                cell=archive.bins.check_cell(d["cell"]), fitness=float(d["fitness"]),
                generation=int(d["generation"]), is_migrant=bool(d["is_migrant"]),
                home_island=int(d["home_island"])))
        archive._cell_log = {tuple(c): [tuple(t) for t in log]
                             for c, log in state["cell_log"]}
        archive._counts = {k: int(v) for k, v in state["counts"].items()}
        return archive
