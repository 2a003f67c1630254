"""Where the judge's time went: the per-phase seconds of evaluations, summed.

Each evaluation may carry `EvalResult.metrics["phases"]`, a flat {phase name: seconds}
dict ("static_checks", "build", "trials", "timing", "tuning", ...; names are
open-ended). `PhaseSums` adds them up, over the run and per task; `judged_per_minute`
is the steady-state rate of judged candidates, from the first to the last evaluation
recorded in each driver session. Pure, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from foundry.types import EvalResult


def phases_of(result: EvalResult) -> dict[str, float]:
    """The result's {phase: seconds}; entries that are not finite non-negative numbers
    are left out, and so is the whole thing when it is not a mapping."""
    raw = (result.metrics or {}).get("phases") if isinstance(result.metrics, Mapping) else None
    if not isinstance(raw, Mapping):
        return {}
    out: dict[str, float] = {}
    for name, value in raw.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if math.isfinite(value) and value >= 0:
            out[str(name)] = float(value)
    return out


# the phases a task pays for once, in the evaluation that first needs them (as
# foundry.evaluate.phases names them): its fit check and reference ops, its degeneracy
# check, its eager and torch.compile baselines
FIRST_TIME_PHASES = ("task_setup", "degeneracy", "baseline_eager", "baseline_compile")


def _add(into: dict[str, float], phases: Mapping[str, float]) -> None:
    for name, s in phases.items():
        into[name] = into.get(name, 0.0) + s


def _rounded(phases: Mapping[str, float]) -> dict[str, float]:
    return {k: round(v, 3) for k, v in sorted(phases.items())}


@dataclass
class PhaseSums:
    """Seconds per phase over the evaluations added (those that carried phases)."""

    total_s: dict[str, float] = field(default_factory=dict)
    by_task_s: dict[str, dict[str, float]] = field(default_factory=dict)
    evaluations: int = 0  # evaluations whose phases were summed

    def add(self, *, task_id: str, result: EvalResult) -> bool:
        """Sum the result's phases; False when it carried none."""
        phases = phases_of(result)
        if not phases:
            return False
        self.evaluations += 1
        _add(self.total_s, phases)
        _add(self.by_task_s.setdefault(task_id, {}), phases)
        return True

    @staticmethod
    def of(results: Iterable[tuple[str, EvalResult]]) -> "PhaseSums":
        """Sums over (task id, result) pairs."""
        sums = PhaseSums()
        for task_id, result in results:
            sums.add(task_id=task_id, result=result)
        return sums

    @property
    def seconds(self) -> float:
        return sum(self.total_s.values())

    def first_time_setup(self) -> dict[str, float]:
        """Per task, the seconds of its FIRST_TIME_PHASES (tasks with none left out)."""
        setup = {task: sum(phases.get(name, 0.0) for name in FIRST_TIME_PHASES)
                 for task, phases in self.by_task_s.items()}
        return {task: s for task, s in setup.items() if s > 0}

    def top(self, n: int) -> list[tuple[str, float]]:
        """The `n` phases that took longest, longest first."""
        return sorted(self.total_s.items(), key=lambda kv: (-kv[1], kv[0]))[:max(0, n)]

    def to_json(self) -> dict[str, Any]:
        """What run.json keeps: seconds per phase, per task, and how many evaluations
        were summed."""
        return {"phases_s": _rounded(self.total_s), "phases_evaluations": self.evaluations,
                "phases_by_task_s": {t: _rounded(p) for t, p in sorted(self.by_task_s.items())}}


BATCH_S = 0.25  # recorded this close after a session's first evaluation: the same drain
MIN_SPAN_S = 1.0  # a session whose evaluations span less gives no rate


def judged_per_minute(times_by_session: Mapping[str, Iterable[float]]) -> float | None:
    """Judged candidates per minute in steady state, from the evaluations' recording
    times (unix seconds), per driver session: those recorded after the first batch (the
    driver records a batch per poll) over the time from the first to the last; sessions
    are summed. None when no session's evaluations span `MIN_SPAN_S`."""
    count, span = 0, 0.0
    for times in times_by_session.values():
        ts = sorted(float(t) for t in times)
        if len(ts) < 2 or ts[-1] - ts[0] < MIN_SPAN_S:
            continue
        count += sum(1 for t in ts if t > ts[0] + BATCH_S)
        span += ts[-1] - ts[0]
    return 60.0 * count / span if span > 0 else None
