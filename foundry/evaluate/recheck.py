"""The recheck step's verdict: a suspiciously large speedup is measured again in a fresh
worker on new inputs, with the device to itself (the Evaluator runs that job); here its
outcome is judged as the first job's was (correctness, then the timed runs), and the
slower of the two times is kept. A re-measurement that did not complete, or that fails a
check the first one passed, flags `recheck_failed` and keeps the first time.
"""

from __future__ import annotations

from typing import Any, Callable

from foundry.evaluate.correctness import judge_outputs, release_judged_trials
from foundry.evaluate.job import Job
from foundry.evaluate.sandbox import JobOutcome
from foundry.evaluate.timed_runs import check_timed_runs
from foundry.evaluate.verdict import Findings
from foundry.types import Stage


def judge_recheck(f: Findings, out: JobOutcome, job: Job, *, runtime: float, spread: float | None, metrics: dict,
                  references: Callable[[], dict], rescaled: Callable[[int, float], Any], launch_key: str | None,
                  allow_torch_ops: bool, reference_ops: frozenset, atol: float, rtol: float,
                  precise: Callable[[int, float], Any] | None = None):
    """(runtime_ms, spread) to report after the re-measurement `out` of `job`: the slower of
    it and the first (`runtime`, `spread`); `references()`: the reference outputs of the
    job's trials (computed only when its trials all came); `precise`: as for the first job
    (verdict.check_trials)."""
    timing_msgs = out.of_kind("timing")
    if not timing_msgs or len(out.of_kind("trial")) < len(job.trials):
        f.flag("recheck_failed", "the re-measurement of a large speedup did not complete: " + out.exit_text())
        return runtime, spread
    refs = references()
    g = Findings()
    judge_outputs(g, out, job, refs, launch_key=launch_key, allow_torch_ops=allow_torch_ops,
                  reference_ops=reference_ops, atol=atol, rtol=rtol, precise=precise)
    release_judged_trials(g, out, job, refs)
    again, again_spread = check_timed_runs(g, out, timing_msgs[0], refs, job, metrics,
                                           atol=atol, rtol=rtol, rescaled=rescaled, precise=precise)
    if g.stage != Stage.CORRECT or g.flags:
        f.flag("recheck_failed", "the re-measurement failed: " + "; ".join(g.errors)[:500])
        return runtime, spread
    metrics["recheck_runtime_ms"] = again
    if again and again > runtime:
        return again, again_spread
    return runtime, spread
