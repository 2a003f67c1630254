"""Per-task figures of a run, computed from its evaluation log (pure, no I/O)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from foundry.store.evallog import EvaluationRecord


@dataclass(frozen=True)
class TaskSummary:
    task_id: str
    evaluations: int
    correct: int
    best_speedup_eager: float | None
    best_speedup_compile: float | None
    best_candidate_id: str | None
    best_runtime_ms: float | None
    eager_ms: float | None
    compile_ms: float | None
    llm_cost_usd: float
    backends: tuple = ()
    curve: tuple = ()  # (evaluation number within the task, best speedup vs eager so far)
    cells: dict = field(default_factory=dict)  # descriptor tuple -> best fitness
    stages: dict = field(default_factory=dict)  # stage -> count
    best_roofline: dict | None = None  # the best kernel's metrics["roofline"] (Roofline.position), if measured
    best_strategy: str | None = None  # what made the best kernel: "compiler:inductor", "template:fused", ...
    best_hardware: dict | None = None  # the best kernel's metrics["hardware"] (source, diagnosis), if profiled
    baseline_kernels: dict | None = None  # what eager's and torch.compile's forwards launched (GPU runs)
    failures: tuple = ()  # why its evaluations failed: `failure_lines`, most frequent first
    baseline_error: str = ""  # where eager's or torch.compile's time is missing: the last line of why

    @property
    def share_correct(self) -> float:
        return self.correct / self.evaluations if self.evaluations else 0.0


FAILURE_LINES = 3  # distinct failure lines a summary keeps
FAILURE_LINE_CHARS = 240  # a failure line's length at most


def failure_lines(records: Iterable[EvaluationRecord], *, keep: int = FAILURE_LINES) -> tuple[str, ...]:
    """The first lines of the failed records' errors (the stage reached where there is no
    error text; a device out-of-memory condensed, `out_of_memory_line`), distinct, the most
    frequent first (ties: the earliest first), at most `keep`."""
    counts: dict[str, int] = {}
    for r in records:
        if not r.result.correct:
            first = (r.result.error.strip().splitlines() or [f"stopped at stage {r.result.stage}"])[0]
            line = (out_of_memory_line(first) or first)[:FAILURE_LINE_CHARS]
            counts[line] = counts.get(line, 0) + 1
    return tuple(sorted(counts, key=lambda line: -counts[line])[:keep])


_OUT_OF_MEMORY = re.compile(r"CUDA out of memory\. Tried to allocate (?P<asked>[\d.]+ \w+)\. GPU \d+ has a total "
                            r"capacity of (?P<total>[\d.]+ \w+) of which (?P<free>[\d.]+ \w+) is free")
_HOLDER = re.compile(r"(?P<who>this process|Process (?P<pid>\d+)) has (?P<held>[\d.]+ \w+) memory in use")


def out_of_memory_line(line: str) -> str:
    """torch's CUDA out-of-memory message in `line` condensed to what was asked, what was
    free and what each process on the device held (the message lists the processes past
    where a failure line is cut), with what came before the message; "" for another line."""
    found = _OUT_OF_MEMORY.search(line)
    if found is None:
        return ""
    held = ", ".join(f"{'this process' if h['pid'] is None else 'process ' + h['pid']} {h['held']}"
                     for h in _HOLDER.finditer(line))
    return (f"{line[:found.start()]}CUDA out of memory: {found['asked']} asked, {found['free']} of {found['total']} "
            f"free" + (f"; held: {held}" if held else ""))


def last_line(text: str, *, limit: int = 240) -> str:
    """The last non-blank line of `text` (the end of a traceback says what failed), at most
    `limit` characters; "" for blank text."""
    lines = [line.strip() for line in str(text or "").splitlines() if line.strip()]
    return lines[-1][:limit] if lines else ""


def baseline_error(records: Iterable[EvaluationRecord]) -> str:
    """`last_line` of the newest baseline error the records carried, "" when none did."""
    error = ""
    for r in records:
        error = last_line((r.result.metrics or {}).get("baseline_error") or "") or error
    return error


def task_baselines(records: Iterable[EvaluationRecord]) -> dict[str, tuple[float | None, float | None]]:
    """The task's eager and torch.compile times per hardware id, the last each of its
    records carried."""
    out: dict[str, tuple[float | None, float | None]] = {}
    for r in records:
        eager, compiled = out.get(r.result.hardware, (None, None))
        out[r.result.hardware] = (r.result.eager_ms or eager, r.result.compile_ms or compiled)
    return out


def speedups(record: EvaluationRecord, baselines: Mapping[str, tuple]) -> tuple[float | None, float | None]:
    """A correct record's speedups over eager and torch.compile: its own, or, where the
    task's baselines failed when it was judged, its time against the baselines another
    record of the task carried from the same hardware (`task_baselines`)."""
    res = record.result
    eager, compiled = baselines.get(res.hardware, (None, None))
    ms = res.runtime_ms
    return (res.speedup_eager if res.speedup_eager is not None else (eager / ms if eager and ms else None),
            res.speedup_compile if res.speedup_compile is not None else (compiled / ms if compiled and ms else None))


def best_record(records: Iterable[EvaluationRecord]) -> EvaluationRecord | None:
    """The correct record with the highest speedup vs eager (first one wins ties; see
    `speedups` for a record judged while the task's baselines failed); where no correct
    record has one, the fastest correct record."""
    records = list(records)
    return _best(records, task_baselines(records))


def _best(records: list[EvaluationRecord], baselines: Mapping[str, tuple]) -> EvaluationRecord | None:
    best = fastest = None
    best_speedup = None
    for r in records:
        if not r.result.correct:
            continue
        speedup = speedups(r, baselines)[0]
        if speedup is not None:
            if best is None or speedup > best_speedup:
                best, best_speedup = r, speedup
        elif r.result.runtime_ms is not None:
            if fastest is None or r.result.runtime_ms < fastest.result.runtime_ms:
                fastest = r
    return best or fastest


def _roofline(best: EvaluationRecord | None) -> dict | None:
    position = (best.result.metrics or {}).get("roofline") if best is not None else None
    return dict(position) if isinstance(position, Mapping) and position.get("floor_ms") else None


def _hardware(best: EvaluationRecord | None) -> dict | None:
    profile = (best.result.metrics or {}).get("hardware") if best is not None else None
    return dict(profile) if isinstance(profile, Mapping) and profile.get("source") else None


def _baseline_kernels(best: EvaluationRecord | None) -> dict | None:
    kernels = (best.result.metrics or {}).get("baseline_kernels") if best is not None else None
    return dict(kernels) if isinstance(kernels, Mapping) and kernels else None


def summarize(records: Iterable[EvaluationRecord], *, task_ids: Iterable[str] = (),
              llm_cost_by_task: Mapping[str, float] | None = None) -> dict[str, TaskSummary]:
    """One TaskSummary per task (tasks in `task_ids` appear even with no evaluation)."""
    by_task: dict[str, list[EvaluationRecord]] = {t: [] for t in task_ids}
    for r in sorted(records, key=lambda r: r.seq):
        by_task.setdefault(r.candidate.task_id, []).append(r)
    costs = dict(llm_cost_by_task or {})
    out = {}
    for task_id, recs in by_task.items():
        baselines = task_baselines(recs)
        best = _best(recs, baselines)
        best_eager, best_compile = speedups(best, baselines) if best else (None, None)
        curve, running = [], None
        cells: dict[tuple, float] = {}
        stages: dict[int, int] = {}
        eager = compile_ = None
        for i, r in enumerate(recs, 1):
            res = r.result
            if res.correct and res.speedup_eager is not None:
                running = res.speedup_eager if running is None else max(running, res.speedup_eager)
            curve.append((i, running))
            if res.descriptor:
                key = tuple(res.descriptor)
                cells[key] = max(cells.get(key, float("-inf")), res.fitness)
            stages[int(res.stage)] = stages.get(int(res.stage), 0) + 1
            eager = res.eager_ms if res.eager_ms is not None else eager
            compile_ = res.compile_ms if res.compile_ms is not None else compile_
        out[task_id] = TaskSummary(
            task_id=task_id, evaluations=len(recs), correct=sum(r.result.correct for r in recs),
            best_speedup_eager=best_eager, best_speedup_compile=best_compile,
            best_candidate_id=best.candidate.candidate_id if best else None,
            best_runtime_ms=best.result.runtime_ms if best else None,
            eager_ms=eager, compile_ms=compile_, llm_cost_usd=float(costs.get(task_id, 0.0)),
            backends=tuple(sorted({r.candidate.backend for r in recs})), curve=tuple(curve),
            cells=cells, stages=stages, best_roofline=_roofline(best), best_hardware=_hardware(best),
            baseline_kernels=_baseline_kernels(best), failures=failure_lines(recs),
            baseline_error=baseline_error(recs) if eager is None or compile_ is None else "",
            best_strategy=(best.candidate.strategy_id or best.candidate.origin) if best else None)
    return out


def geometric_means(summaries: Iterable[TaskSummary]) -> dict[str, Any]:
    """Over the tasks, the geometric means of the best speedup vs eager and vs
    torch.compile, a task without a correct kernel counted at eager's time (1x vs eager;
    its eager time against torch.compile's, where both are known); with how many tasks
    each mean covers."""
    eager, compiled = [], []
    for s in summaries:
        if s.best_speedup_eager:
            eager.append(s.best_speedup_eager)
            if s.best_speedup_compile:
                compiled.append(s.best_speedup_compile)
        elif s.evaluations:
            eager.append(1.0)
            if s.eager_ms and s.compile_ms:
                compiled.append(s.compile_ms / s.eager_ms)

    def mean(xs: list[float]) -> float | None:
        return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None
    return {"vs_eager": mean(eager), "vs_eager_tasks": len(eager),
            "vs_compile": mean(compiled), "vs_compile_tasks": len(compiled)}
