"""What an evaluator actor does with one candidate (pure, no Ray): evaluate it, or, when
it declares a parameter space (`TUNABLE`) and tuning is on, tune it with the evaluator
as the measurement (foundry.tuning) and return the best setting and its result."""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Mapping

from foundry.types import Candidate, EvalResult, Task

_TUNABLE = re.compile(r"^TUNABLE\s*[:=]", re.M)


def as_logged(*, submitted: Candidate, evaluated: Candidate) -> Candidate:
    """The candidate an island logs for a submitted child: the child itself, or, when
    tuning changed its params, the tuned code carrying the child's lineage."""
    if evaluated.candidate_id == submitted.candidate_id:
        return submitted
    return dataclasses.replace(evaluated, island_id=submitted.island_id, parent_ids=submitted.parent_ids,
                               generation=submitted.generation, strategy_id=submitted.strategy_id)


def tuner_config(templates: Mapping[str, Any]) -> dict:
    """The tuner's settings from the `templates` group (its tune_* keys)."""
    return {"budget": int(templates.get("tune_budget", 16)),
            "exhaustive_max": int(templates.get("tune_exhaustive_max", 32)),
            "seed": int(templates.get("tune_seed", 0)), "cache_path": templates.get("tune_cache")}


class EvaluationService:
    def __init__(self, *, evaluator: Any, tuning: Mapping[str, Any] | None, device: str):
        self.evaluator, self.device = evaluator, device
        self.tuner = None
        if tuning is not None:
            from foundry.tuning import Tuner, TunerConfig
            self.tuner = Tuner(config=TunerConfig.from_config(dict(tuning)))
        self.measurements = 0

    def _measure(self, task: Task, seen: dict | None = None):
        def measure(candidate: Candidate) -> EvalResult:
            self.measurements += 1
            if seen is not None:
                seen[candidate.candidate_id] = candidate
            return self.evaluator.evaluate(task=task, candidate=candidate)
        return measure

    def run(self, task: Task, candidate: Candidate) -> tuple[Candidate, EvalResult]:
        """(the candidate as evaluated, possibly with tuned params; its result)."""
        if self.tuner is None or not candidate.source or not _TUNABLE.search(candidate.source):
            return candidate, self._measure(task)(candidate)
        seen: dict[str, Candidate] = {candidate.candidate_id: candidate}
        tuned = self.tuner.tune(task=task, candidate=candidate, measure=self._measure(task, seen),
                                device=self.device)
        if tuned.result is None:
            return tuned.candidate, self._measure(task)(tuned.candidate)
        # with no correct setting the tuner reports its last measurement: keep the pair matched
        return seen.get(tuned.result.candidate_id, tuned.candidate), tuned.result
