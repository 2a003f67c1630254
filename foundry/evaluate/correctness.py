"""The correctness step: a candidate job's outputs against the judge's reference outputs.

Every trial's output against its reference (verdict.check_trials: values, launches, the
torch ops it ran), then the repeat of the main trials (the same inputs, the same answer),
the paired trials of the differential inputs (different inputs, different answers where
the reference's differ), the idle probes and the protocol; then what the timed-runs check
no longer needs is let go (`release_judged_trials`). Guard flags and the stage go
into the evaluation's Findings; nothing here runs a process or times anything.
"""

from __future__ import annotations

from typing import Any, Callable

from foundry.evaluate import protocol
from foundry.evaluate.job import Job
from foundry.evaluate.sandbox import JobOutcome
from foundry.evaluate.verdict import (Findings, check_consistency, check_input_use, check_probes, check_trials, decode,
                                      torch_compute_violation)


def judge_outputs(f: Findings, out: JobOutcome, job: Job, references: dict, *, launch_key: str | None,
                  allow_torch_ops: bool, reference_ops: frozenset, atol: float, rtol: float,
                  precise: Callable[[int, float], Any] | None = None) -> None:
    """Every trial's output against its reference (a heavy-tailed trial's also against
    `precise`, the reference computed in float64: verdict.check_trials), then the repeat,
    the probes and the protocol: guard flags and the stage go into `f`."""
    trials = {m.header.get("index"): m for m in out.of_kind("trial")}
    check_trials(f, trials, references, job.trials, atol=atol, rtol=rtol, launch_key=launch_key,
                 allow_torch_ops=allow_torch_ops, reference_ops=reference_ops, precise=precise)
    repeat = out.of_kind("repeat")
    try:
        rep = decode(repeat[0]) if repeat else None
    except protocol.ProtocolError as e:
        f.flag("protocol_violation", str(e))
        rep = None
    check_consistency(f, references, rep, job.main_trials, atol=atol, rtol=rtol)
    check_input_use(f, references, job.trials, [(p, job.base_of(p)) for p in job.paired_trials])
    check_probes(f, out.probes)
    if out.protocol_error:
        f.flag("protocol_violation", out.protocol_error)


def release_judged_trials(f: Findings, out: JobOutcome, job: Job, references: dict) -> None:
    """Once `judge_outputs` has run, the timed-runs check needs only the timed sets'
    references and the timed runs' outputs: let go of the trials' and the repeat's
    received outputs and of the other trials' references, so that a reference computed
    again at a scale (timed_runs.check_timed_runs) fits in what they held. For a task of
    7.5 GB outputs, that is four outputs fewer at the judge's peak."""
    f.candidate_outputs.clear()
    out.drop_tensors(kinds=("trial", "repeat"))
    keep = set(job.timing.sets) if job.timing else set()
    for i in [i for i in references if i not in keep]:
        del references[i]


def idle_reply(out: JobOutcome, *, stop_early: bool, strict: bool, reference_ops: frozenset) -> bytes:
    """The judge's answer when a candidate job idles after its trials: b"s" (stop: a guard
    already fired, `stop_early`, or a trial computed with torch, launched no kernel of its
    own where `strict`, or changed its inputs) or b"g" (go on to the timed runs)."""
    def bad_ops(h: dict) -> bool:
        ops = h.get("torch_ops")
        return bool(ops) and isinstance(ops, dict) and bool(
            torch_compute_violation(set(map(str, ops)), set(reference_ops)))

    if stop_early or any((strict and (bad_ops(m.header) or m.header.get("launches") == 0))
                         or m.header.get("inputs_changed") for m in out.of_kind("trial")):
        return b"s"
    return b"g"
