"""What an evaluator actor does with one candidate (pure, no Ray): evaluate it, or, when
it declares a parameter space (`TUNABLE`) and tuning is on, tune it with the evaluator
as the measurement (foundry.tuning) and return the best setting and its result.

A tuned result's `metrics["phases"]` (the judge's seconds per phase of that one
measurement) gets a "tuning" entry: the time spent measuring the other settings, so
the phases of a result still add up to what its evaluation cost."""

from __future__ import annotations

import dataclasses
import re
import time
from typing import Any, Mapping

from actors.twins import BREADTH, TUNING_DEFERRED
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
    """The tuner's settings from the `templates` group (its tune_* keys), as a plain dict
    for an actor's arguments."""
    from foundry.templates.config import TemplateConfig
    return dataclasses.asdict(TemplateConfig.from_config(dict(templates)).tuner_config())


class EvaluationService:
    def __init__(self, *, evaluator: Any, tuning: Mapping[str, Any] | None, device: str,
                 ceilings: Any = None, explored: Any = None, covered: set | None = None):
        """`ceilings` (foundry.tasks.roofline.DeviceCeilings of the device, or None): each
        correct result then gets `metrics["roofline"]`, its position against the task's
        floor (`Roofline.position`). `explored` (foundry.tuning.explored.ExploredPoints):
        what the tuners of the same device measured so far, shared by its lanes; `covered`:
        the ids of the tasks they have judged a correct kernel for, shared the same way
        (where tuning waits for it, `tune_uncovered` false)."""
        self.evaluator, self.device, self.ceilings = evaluator, device, ceilings
        self.covered = covered if covered is not None else set()
        self.tuner = None
        if tuning is not None:
            from foundry.tuning import Tuner, TunerConfig
            self.tuner = Tuner(config=TunerConfig.from_config(dict(tuning)), explored=explored)
        self.measurements = 0
        self._floors: dict[tuple, Any] = {}  # (task id, source hash) -> Roofline, or the reason there is none

    def _measure(self, task: Task, seen: dict | None = None):
        def measure(candidate: Candidate) -> EvalResult:
            self.measurements += 1
            if seen is not None:
                seen[candidate.candidate_id] = candidate
            return self.evaluator.evaluate(task=task, candidate=candidate)
        return measure

    def _screen(self, task: Task):
        """The evaluator's one-job screening of TUNABLE settings, where it has one."""
        screen = getattr(self.evaluator, "screen", None)
        if screen is None:
            return None

        def run_screen(candidate: Candidate, settings: list):
            self.measurements += 1
            return screen(task=task, candidate=candidate, points=settings)
        return run_screen

    def run(self, task: Task, candidate: Candidate, *, tune: bool = True) -> tuple[Candidate, EvalResult]:
        """(the candidate as evaluated, possibly with tuned params; its result, with its
        roofline position where the service has the device's ceilings). `tune` False:
        judged at its own settings, as the run's tuning waits (actors.twins.BREADTH)."""
        evaluated, result = self._run(task, candidate, tune)
        if result.correct:
            self.covered.add(task.task_id)
        return evaluated, self._with_roofline(task, result)

    def _with_roofline(self, task: Task, result: EvalResult) -> EvalResult:
        if self.ceilings is None or not result.correct or not result.runtime_ms:
            return result
        key = (task.task_id, task.source_hash)
        if key not in self._floors:
            from foundry.tasks.roofline import roofline_for_task
            try:  # on the meta device only: a full-size reference is never run here
                self._floors[key] = roofline_for_task(task, ceilings=self.ceilings, fallback_device=None)
            except Exception as e:  # noqa: BLE001 - a report, never a verdict
                self._floors[key] = f"no roofline (the reference does not run on the meta device: {type(e).__name__})"
        floor = self._floors[key]
        if isinstance(floor, str):
            extra: dict = {"roofline_note": floor}
        else:  # the kernel's position, and its baselines' fractions of the same floor
            position = floor.position(result.runtime_ms)
            position.update({f"{which}_fraction": round(floor.fraction(ms) or 0.0, 4)
                             for which, ms in (("eager", result.eager_ms), ("compile", result.compile_ms)) if ms})
            extra = {"roofline": position}
        return dataclasses.replace(result, metrics={**(result.metrics or {}), **extra})

    def _run(self, task: Task, candidate: Candidate, tune: bool) -> tuple[Candidate, EvalResult]:
        if self.tuner is None or not candidate.source or not _TUNABLE.search(candidate.source):
            return candidate, self._measure(task)(candidate)
        # coverage first: tuning waits for every task's first verdict (`tune` False) and for
        # a correct kernel of this task, and the verdict says so (so that the same code
        # proposed later, with the task covered, is tuned: actors.twins)
        deferred = None
        if not tune:
            deferred = BREADTH
        elif not self.tuner.config.tune_uncovered and task.task_id not in self.covered:
            deferred = True
        if deferred is not None:
            result = self._measure(task)(candidate)
            return candidate, dataclasses.replace(result, metrics={**(result.metrics or {}), TUNING_DEFERRED: deferred})
        seen: dict[str, Candidate] = {candidate.candidate_id: candidate}
        started, before = time.monotonic(), self.measurements
        tuned = self.tuner.tune(task=task, candidate=candidate, measure=self._measure(task, seen),
                                device=self.device, screen=self._screen(task))
        if tuned.result is None:
            result = self._measure(task)(tuned.candidate)
            return tuned.candidate, with_tuning_phase(result, spent_s=time.monotonic() - started,
                                                      measurements=self.measurements - before)
        result = with_tuning_phase(tuned.result, spent_s=time.monotonic() - started,
                                   measurements=self.measurements - before)
        # with no correct setting the tuner reports its last measurement: keep the pair matched
        return seen.get(result.candidate_id, tuned.candidate), result


def with_tuning_phase(result: EvalResult, *, spent_s: float, measurements: int) -> EvalResult:
    """`result` (one of `measurements` that took `spent_s` in all) with the time of the
    others added to its phases as "tuning"; unchanged after a single measurement."""
    if measurements <= 1:
        return result
    metrics = dict(result.metrics or {})
    phases = metrics.get("phases")
    phases = dict(phases) if isinstance(phases, Mapping) else {}
    others = max(0.0, spent_s - float(result.eval_s or 0.0))
    previous = phases.get("tuning")
    previous = float(previous) if isinstance(previous, (int, float)) and not isinstance(previous, bool) else 0.0
    phases["tuning"] = round(previous + others, 6)
    metrics["phases"] = phases
    return dataclasses.replace(result, metrics=metrics)
