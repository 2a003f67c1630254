"""`IslandHost`: the runtime's view of one island of one task.

The only module of the runtime that calls the island API (`islands.Island`): the next
request context (parent, inspirations, mode, hint), inserting a child, migration,
checkpoints and replaying logged evaluations.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from foundry.types import Candidate, EvalResult


class IslandHost:
    def __init__(self, island: Any):
        self.island = island

    @property
    def island_id(self) -> int:
        return int(self.island.island_id)

    def context(self) -> Any:
        """The island's `RequestContext` for its next child (mode, parent, inspirations)."""
        return self.island.next_request_context()

    def adopt(self, child: Candidate, *, generation: int, parent: Candidate | None,
              prompt_id: str) -> Candidate:
        """The child as this island records it: on this island (a child lands on its
        parent's island), with its parent's id and the prompt that made it; the id stays
        the content hash."""
        changes: dict[str, Any] = {"island_id": self.island_id, "generation": generation}
        if parent is not None and parent.candidate_id not in child.parent_ids:
            changes["parent_ids"] = (parent.candidate_id,) + tuple(child.parent_ids)
        if prompt_id and not child.strategy_id:
            changes["strategy_id"] = prompt_id
        return dataclasses.replace(child, **changes)

    @property
    def evaluations(self) -> int:
        """Evaluated children inserted here (logged ones replayed after a resume included)."""
        return int(self.island.generation)

    def best_correct(self) -> EvalResult | None:
        """The result of the fittest elite where it is correct (fitness ranks every correct
        kernel above every incorrect one), else None."""
        best = self.island.archive.best()
        return best.result if best is not None and best.result.correct else None

    def has_seen(self, candidate_id: str) -> bool:
        return bool(self.island.knows(candidate_id))

    def would_enter(self, candidate: Candidate, result: EvalResult) -> bool:
        """Whether `add` would make it an elite now (fill or improve its cell)."""
        return bool(self.island.would_enter(candidate=candidate, result=result))

    def add(self, candidate: Candidate, result: EvalResult) -> tuple[EvalResult, bool]:
        """Insert an evaluated child; returns (result with its descriptor cell, whether
        it filled or improved a cell)."""
        outcome = self.island.add(candidate=candidate, result=result)
        return outcome.result, outcome.status.value in ("new", "improved")

    def replay(self, candidate: Candidate, result: EvalResult) -> bool:
        """Insert a logged evaluation again (restart/resume); False when already held.
        A parent that only reached this island by migration may be missing after a
        resume from the log alone: the child is then inserted without the link."""
        if self.has_seen(candidate.candidate_id):
            return False
        candidate = dataclasses.replace(candidate, island_id=self.island_id)
        try:
            self.island.add(candidate=candidate, result=result)
        except ValueError:
            self.island.add(candidate=dataclasses.replace(candidate, parent_ids=()), result=result)
        return True

    # -- migration ----------------------------------------------------------
    def emigrants(self) -> list:
        return list(self.island.emigrants()) if self.island.migration_due() else []

    def immigrate(self, elites: list) -> int:
        if not elites:
            return 0
        statuses = self.island.immigrate(elites=elites)
        return sum(1 for s in statuses if s.value in ("new", "improved"))

    # -- checkpoints --------------------------------------------------------
    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.island.save(str(path))

    def load(self, path: Path) -> None:
        self.island = type(self.island).load(str(path))
