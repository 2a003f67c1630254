"""The scoring step: a correct candidate's runtime against the task's baselines.

Speedups over eager and torch.compile; one above `speedup_recheck_threshold` is measured
again (`recheck`, the recheck step) before it counts, and the slower time is kept. The
baseline's error (its end) and, on a GPU, what each baseline's forward launched go into
the result's metrics, and so do the speedups by CUDA-event time alone (`gpu_speedup`:
what the GPU spends, without the host's launch cost; inside a CUDA graph that is all a
region costs, while the judge's time of a launch-bound call is its back-to-back time).
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from foundry.evaluate.baselines import Baseline, event_median_ms
from foundry.evaluate.phases import PhaseTimes
from foundry.evaluate.verdict import Findings
from foundry.types import Stage

BASELINE_ERROR_KEPT = 1500  # characters of a failed baseline's error kept in a result's metrics (its end)


@dataclasses.dataclass(frozen=True)
class Judged:
    """A candidate's outputs judged (the findings are in its Findings): what scoring needs."""

    metrics: dict
    runtime_ms: float | None
    spread: float | None
    compile_s: float


def score(f: Findings, b: Baseline, runtime: float, spread: float | None, metrics: dict, result_kw: dict, *,
          recheck_threshold: float, recheck: Callable[[float, float | None], tuple], phases: PhaseTimes):
    """Speedups against the task's baselines `b`; a suspiciously large one is measured
    again (`recheck(runtime, spread)` -> the runtime and spread to keep). Fills
    `result_kw`; returns the (possibly slower) runtime and spread."""
    speedup = b.eager_ms / runtime if b.eager_ms else None
    if speedup and speedup > recheck_threshold:
        with phases.measure("recheck"):
            runtime, spread = recheck(runtime, spread)
        speedup = b.eager_ms / runtime if runtime else None
    if b.error:  # a traceback's end says what failed
        metrics["baseline_error"] = b.error[-BASELINE_ERROR_KEPT:]
    if b.eager_kernels or b.compile_kernels:
        metrics["baseline_kernels"] = {k: v for k, v in (("eager", b.eager_kernels),
                                                         ("compile", b.compile_kernels)) if v}
    if f.stage == Stage.CORRECT and not f.flags:
        result_kw.update(eager_ms=b.eager_ms, compile_ms=b.compile_ms, speedup_eager=speedup,
                         speedup_compile=(b.compile_ms / runtime) if b.compile_ms and runtime else None)
        timing = metrics.get("gpu_timing") or {}
        # events that missed work (a side stream, a host thread: host_check_ok False) are no measure
        gpu_ms = event_median_ms(timing) if timing.get("host_check_ok") is True else None
        if gpu_ms and b.eager_gpu_ms:
            metrics["gpu_speedup"] = {"eager": b.eager_gpu_ms / gpu_ms,
                                      "compile": b.compile_gpu_ms / gpu_ms if b.compile_gpu_ms else None}
    return runtime, spread
