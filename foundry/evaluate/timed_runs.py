"""The timing step's checks: the worker's report of its timed runs against the judge's own
clock (timing_report.analyze) and the timed runs' last outputs against the references.

The worker's numbers come from a process that ran candidate code, so the judge trusts
them only as far as its own clock agrees, and only when what the timed runs computed,
on the inputs they were last given, is right. Where a timed set's inputs were changed
(scaled to 1/2 or 1/4) before its last block, its reference is computed again at that
scale (`rescaled`).
"""

from __future__ import annotations

from typing import Any, Callable

from foundry.evaluate import protocol
from foundry.evaluate.compare import compare
from foundry.evaluate.job import Job
from foundry.evaluate.sandbox import JobOutcome
from foundry.evaluate.timing_report import analyze
from foundry.evaluate.verdict import Findings, decode, precise_verdict


def check_timed_runs(f: Findings, out: JobOutcome, msg: Any, references: dict, job: Job, metrics: dict, *,
                     atol: float, rtol: float, rescaled: Callable[[int, float], Any],
                     precise: Callable[[int, float], Any] | None = None):
    """(runtime_ms, spread) of the timing message `msg`, its guards' findings in `f` and
    its measurements in `metrics`; `rescaled(i, scale)`: the reference output of trial `i`
    on its inputs times `scale`; `precise(i, scale)`: the same computed in float64, for a
    timed run on a trial that passed against it (`f.float64_trials`, verdict.check_trials)."""
    starts = out.of_kind("timing_start")
    ends = out.of_kind("timing_end")
    verdict = analyze(msg.header, started_at=starts[0].at if starts else None,
                      ended_at=ends[0].at if ends else msg.at)
    if isinstance(msg.header.get("gpu"), dict):
        metrics["gpu_timing"] = {k: v for k, v in msg.header["gpu"].items()
                                 if isinstance(v, (int, float, str, bool, dict))}
    metrics.update(verdict.metrics)
    for name in verdict.flags:
        f.flag(name, verdict.reason)
    try:
        last = decode(msg)
    except protocol.ProtocolError as e:
        f.flag("protocol_violation", str(e))
        return None, None
    sets = job.timing.sets
    if not isinstance(last, list) or len(last) != len(sets):
        f.flag("timed_output_mismatch", "the timed runs' outputs are missing")
        return verdict.runtime_ms, verdict.spread
    changes = msg.header.get("last_input_changes")
    if not (isinstance(changes, list) and len(changes) == len(sets)
            and all(type(n) is int and n >= 0 for n in changes)):
        changes = [0] * len(sets)
    for k, i in enumerate(sets):
        # inputs scaled to 1/2 (odd changes) or 1/4 (even) before the last block
        scale = 1.0 if not changes[k] else 0.5 if changes[k] % 2 else 0.25
        ref = references[i] if scale == 1.0 else rescaled(i, scale)
        c = compare(ref, last[k], atol=atol, rtol=rtol)
        if c.kind == "value" and precise is not None and i in f.float64_trials:
            c = precise_verdict(f, i, c, last[k], precise, atol=atol, rtol=rtol, scale=scale, reference=ref)
        if not c.ok:
            f.flag("timed_output_mismatch", f"output of a timed run on trial {i}'s inputs: {c.message}")
            break
    return verdict.runtime_ms, verdict.spread
