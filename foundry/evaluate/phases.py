"""Where an evaluation's time goes: named phases, in seconds, for `EvalResult.metrics["phases"]`.

Judge-side phases are measured around the judge's own steps (`PhaseTimes.measure`).
Worker-side phases come from the arrival times of the worker's messages on the judge's
clock (`worker_phases`), plus the two figures the worker measures before any candidate
code runs (device setup and input generation, in its "ready" message).

Phase names (a flat dict; absent when a step did not run):
    static_checks      source checks before anything runs
    task_setup         first evaluation of a task: its fit check and reference ops
                       (split in metrics["task_setup_parts_s"])
    degeneracy         first evaluation of a task, before its job: is the task itself
                       degenerate, and which inputs its jobs check differentially
    worker_start       fork to "ready" (its parts, the worker's device setup and input
                       generation, are in metrics["worker_start_parts_s"])
    build              candidate module executed and models constructed
    trials             correctness trials and the repeat run, outputs transferred
    idle_probes        the judge watching an idle worker for background work
    timing             fresh timing inputs, warm-up and the timed blocks
    worker_exit        last message to the worker's group killed and reaped
    references         reference outputs computed by the judge
    compare            outputs compared, guards applied
    timed_output_check the timed runs' outputs compared
    baseline_eager / baseline_compile   first correct candidate of a task: baselines
    recheck            a large speedup measured again in a fresh worker
    screen             tuning: every TUNABLE point built, checked once and timed in one job
    device_memory_wait lanes: waiting for other evaluations on the device to give back memory
    release            the judge's device memory overwritten and returned
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Iterator


class PhaseTimes:
    """Seconds per phase name, accumulated over one evaluation."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def add(self, name: str, seconds: float) -> None:
        if seconds > 0:
            self.seconds[name] = self.seconds.get(name, 0.0) + float(seconds)

    def merge(self, other: dict[str, float], *, prefix: str = "") -> None:
        for name, s in other.items():
            self.add(prefix + name, s)

    @contextmanager
    def measure(self, name: str) -> Iterator[None]:
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.add(name, time.monotonic() - t0)

    def as_dict(self) -> dict[str, float]:
        return {k: round(v, 4) for k, v in self.seconds.items()}


def _number(header: dict, key: str) -> float:
    v = header.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 else 0.0


def worker_start_parts(out: Any) -> dict[str, float]:
    """The worker's own split of "worker_start", measured before any candidate code ran:
    device setup (context, threads) and every trial's inputs generated."""
    head = next((m.header for m in out.messages if m.header.get("kind") == "ready"), None)
    if head is None:
        return {}
    return {"device_setup_s": round(_number(head, "device_setup_s"), 4), "inputs_s": round(_number(head, "inputs_s"), 4)}


def worker_phases(out: Any, *, ended_at: float | None = None) -> dict[str, float]:
    """Phases of one sandbox job from its messages' arrival times (`out`: a JobOutcome)."""
    msgs = out.messages
    if not msgs:
        return {"worker_start": out.wall_s}
    first: dict[str, float] = {}
    for m in msgs:
        first.setdefault(m.header.get("kind"), m.at)
    phases: dict[str, float] = {}
    t = out.started_at
    ready = first.get("ready")
    if ready is not None:
        phases["worker_start"] = ready - t
        t = ready
    compiled = first.get("compiled")
    if compiled is not None:
        phases["build"] = compiled - t
        t = compiled
        done_trials = first.get("idle") or first.get("error") or msgs[-1].at
        phases["trials"] = max(0.0, done_trials - t)
        t = done_trials
    windows = [float(p.get("window_ms", 0.0)) / 1000.0 for p in out.probes]
    if windows:
        phases["idle_probes"] = sum(windows)
    timed = [m.at for m in msgs if m.header.get("kind") in ("timing", "baseline", "screen_timing")]
    if timed:  # from the go after the first probe (if any) to the last timing report
        phases["timing"] = max(0.0, max(timed) - t - (windows[0] if windows and compiled is not None else 0.0))
        t = max(timed)
    end = ended_at if ended_at is not None else out.started_at + out.wall_s
    phases["worker_exit"] = max(0.0, end - max(t, msgs[-1].at))
    return {k: v for k, v in phases.items() if v > 0}
