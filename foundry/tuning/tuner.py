"""Template-based parameter optimisation: search a candidate's TUNABLE space on the
task's shapes and device with an injected measurement, keep the best values with the
candidate, record every timing, cache per shape and device."""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from foundry.config_keys import checked_keys
from foundry.tuning.cache import TuningCache
from foundry.tuning.explored import ExploredPoints, SpaceKey
from foundry.tuning.space import SpaceError, defaults, points, read_tunable, size
from foundry.types import Candidate, EvalResult, ScreenedPoint, Stage, Task, content_hash


@dataclass(frozen=True)
class TunerConfig:
    """budget: measurements per candidate (the defaults count as one); exhaustive_max:
    spaces up to this many points are walked whole (within the budget), larger ones are
    sampled; seed: the sampling seed; cache_path: JSON cache file (None: no cache);
    repeat_budget: measurements per candidate whose parameter space the tuner has already
    measured on the task (its own setting, the fastest seen, settings not yet tried;
    None: half the budget, at least 2); tune_uncovered: whether its user (an evaluator's
    lanes, actors.evaluation) tunes a task's candidates before it has a correct kernel
    for the task (false: each is measured once at its own settings until then)."""

    budget: int = 16
    exhaustive_max: int = 32
    seed: int = 0
    cache_path: str | None = None
    repeat_budget: int | None = None
    tune_uncovered: bool = False

    def __post_init__(self) -> None:
        if int(self.budget) < 1:
            raise ValueError(f"TunerConfig.budget must be >= 1, got {self.budget!r}")
        if self.repeat_budget is not None and int(self.repeat_budget) < 1:
            raise ValueError(f"TunerConfig.repeat_budget must be >= 1 or None, got {self.repeat_budget!r}")
        if int(self.exhaustive_max) < 1:
            raise ValueError(f"TunerConfig.exhaustive_max must be >= 1, got {self.exhaustive_max!r}")

    @classmethod
    def from_config(cls, mapping: Mapping[str, Any] | None) -> "TunerConfig":
        return cls(**checked_keys(cls, mapping, group="tuner"))

    @property
    def repeat_limit(self) -> int:
        """Measurements for a space already measured on the task (never above the budget)."""
        wanted = self.repeat_budget if self.repeat_budget is not None else max(2, (int(self.budget) + 1) // 2)
        return max(1, min(int(self.budget), int(wanted)))


@dataclass(frozen=True)
class TuningRecord:
    """One measurement of one parameter setting."""

    params: dict
    correct: bool
    runtime_ms: float | None
    speedup_eager: float | None
    stage: int
    error: str = ""

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class TuneResult:
    candidate: Candidate  # carries the best params (the input candidate when none was correct)
    result: EvalResult | None  # the measurement of `candidate`, with metrics["tuning"]
    records: tuple  # every TuningRecord, in the order measured
    from_cache: bool = False


Measure = Callable[[Candidate], EvalResult]
# (candidate, settings) -> one ScreenedPoint per setting, in order: one sandbox job
Screen = Callable[[Candidate, list], Sequence[ScreenedPoint]]
FINALISTS = 2  # screened settings, fastest first, that may get a full evaluation


def _with_params(cand: Candidate, params: dict) -> Candidate:
    return Candidate.make(task_id=cand.task_id, source=cand.source, backend=cand.backend, params=params,
                          parent_ids=cand.parent_ids, island_id=cand.island_id, generation=cand.generation,
                          strategy_id=cand.strategy_id, origin=cand.origin, note=cand.note)


def cache_key(task: Task, cand: Candidate, device: str) -> str:
    return content_hash(cand.source, task.task_id, task.source_hash, cand.backend, device)


class Tuner:
    def __init__(self, *, config: TunerConfig | None = None, explored: ExploredPoints | None = None):
        """`explored`: what was measured of each space so far, shared by the tuners of one
        evaluator's lanes (default: this tuner's own)."""
        self.config = config or TunerConfig()
        self.cache = TuningCache(self.config.cache_path)
        self.explored = explored if explored is not None else ExploredPoints()

    def tune(self, *, task: Task, candidate: Candidate, measure: Measure, device: str,
             screen: Screen | None = None) -> TuneResult:
        """Measure settings of `candidate`'s TUNABLE and return the best correct one
        (fastest median). With `screen`, every setting is screened in one job and only the
        fastest screened ones (at most FINALISTS, until one is correct) get a full
        evaluation by `measure`; without it each setting is a full evaluation. A candidate
        without TUNABLE is measured once."""
        try:
            tunable = read_tunable(candidate.source)
        except SpaceError as e:
            res = measure(candidate)
            return TuneResult(candidate, _annotate(res, [], f"no tuning: {e}"), ())
        key = cache_key(task, candidate, device)
        hit = self.cache.get(key)
        if hit is not None and isinstance(hit.get("params"), dict):
            best = _with_params(candidate, hit["params"])
            res = measure(best)
            if res.correct:
                recs = [TuningRecord(**r) for r in hit.get("records", [])]
                return TuneResult(best, _annotate(res, recs, "cached"), tuple(recs), from_cache=True)
        space = SpaceKey.of(task_id=task.task_id, task_hash=task.source_hash, backend=candidate.backend,
                            device=device, tunable=tunable)
        start = _valid_start(candidate.params, tunable)
        if tunable and self.explored.screens(space):  # measured before: fewer, different settings
            budget = self.config.repeat_limit
            settings = self.explored.plan(space, tunable=tunable, start=dict(defaults(tunable), **start),
                                          limit=budget, seed=int(self.config.seed))
        else:
            budget = int(self.config.budget) if tunable else 1
            settings = points(tunable, limit=budget, exhaustive_max=int(self.config.exhaustive_max),
                              seed=int(self.config.seed), start=start)
        if screen is not None and tunable:
            settings = list(settings)[:budget]
            if len(settings) > 1:
                return self._screened(key, space, tunable, candidate, settings, measure, screen)
        records: list[TuningRecord] = []
        best_c, best_r = None, None
        for params in settings:
            cand = _with_params(candidate, params)
            res = measure(cand)
            records.append(TuningRecord(params=dict(params), correct=bool(res.correct), runtime_ms=res.runtime_ms,
                                        speedup_eager=res.speedup_eager, stage=int(res.stage),
                                        error=(res.error or "")[:300]))
            if res.correct and res.runtime_ms is not None and (
                    best_r is None or res.runtime_ms < best_r.runtime_ms):
                best_c, best_r = cand, res
            if len(records) >= budget:
                break
        if tunable:
            self.explored.record(space, [(r.params, r.runtime_ms if r.correct else None) for r in records])
        if best_c is None:
            last = res if records else measure(candidate)
            return TuneResult(candidate, _annotate(last, records, "no correct setting"), tuple(records))
        self.cache.put(key, {"params": best_c.params, "runtime_ms": best_r.runtime_ms,
                             "records": [r.to_dict() for r in records], "space_size": size(tunable)})
        return TuneResult(best_c, _annotate(best_r, records, "tuned"), tuple(records))


    def _screened(self, key: str, space: SpaceKey, tunable: dict, candidate: Candidate, settings: list,
                  measure: Measure, screen: Screen) -> TuneResult:
        started = time.monotonic()
        screened = list(screen(candidate, settings))
        self.explored.record(space, [(p.params, p.runtime_ms if p.ok else None) for p in screened])
        parts = screen_parts(screened, wall_s=time.monotonic() - started)
        records = [TuningRecord(params=dict(p.params), correct=p.ok, runtime_ms=p.runtime_ms, speedup_eager=None,
                                stage=int(Stage.CORRECT) if p.ok else int(Stage.RUNTIME), error=p.error[:300])
                   for p in screened]
        ranked = sorted((p for p in screened if p.ok and p.runtime_ms), key=lambda p: p.runtime_ms)
        last = None
        for point in ranked[:FINALISTS]:
            cand = _with_params(candidate, point.params)
            last = measure(cand)
            parts["finalists"] += 1
            parts["finalists_s"] = round(parts["finalists_s"] + float(last.eval_s or 0.0), 4)
            if last.correct:
                self.cache.put(key, {"params": cand.params, "runtime_ms": last.runtime_ms,
                                     "records": [r.to_dict() for r in records], "space_size": size(tunable)})
                return TuneResult(cand, _annotate(last, records, "screened", parts), tuple(records))
        if last is None:  # nothing passed the screen: the default setting's full verdict
            last = measure(candidate)
            if last.correct:
                return TuneResult(candidate, _annotate(last, records, "screened: only the default passed", parts),
                                  tuple(records))
        return TuneResult(candidate, _annotate(last, records, "no correct setting", parts), tuple(records))


def _valid_start(params: dict, tunable: dict) -> dict:
    return {k: v for k, v in (params or {}).items() if k in tunable and v in tunable[k]}


def screen_parts(screened: Sequence[ScreenedPoint], *, wall_s: float) -> dict:
    """Where a screen's time went: its wall seconds, the points' own seconds summed by
    part (ScreenedPoint.seconds), and the finalists' full evaluations (filled in later)."""
    parts: dict = {"screen_s": round(wall_s, 4), "screen_points": len(screened), "finalists": 0,
                   "finalists_s": 0.0}
    for point in screened:
        for name, s in (point.seconds or {}).items():
            if isinstance(s, (int, float)) and not isinstance(s, bool):
                parts["screen_" + name] = round(parts.get("screen_" + name, 0.0) + float(s), 4)
    return parts


def _annotate(res: EvalResult, records: list, status: str, parts: dict | None = None) -> EvalResult:
    metrics = dict(res.metrics or {})
    metrics["tuning"] = json.loads(json.dumps([r.to_dict() for r in records]))
    metrics["tuning_status"] = status
    if parts:
        metrics["tuning_parts_s"] = dict(parts)
    return dataclasses.replace(res, metrics=metrics)
