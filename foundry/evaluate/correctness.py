"""The correctness step: a candidate job's outputs against the judge's reference outputs.

Every trial's output against its reference (verdict.check_trials: values, launches, the
torch ops it ran), then the repeat of the main trials (the same inputs, the same answer),
the paired trials of the differential inputs (different inputs, different answers where
the reference's differ), the idle probes and the protocol. Guard flags and the stage go
into the evaluation's Findings; nothing here runs a process or times anything.
"""

from __future__ import annotations

from foundry.evaluate import protocol
from foundry.evaluate.job import Job
from foundry.evaluate.sandbox import JobOutcome
from foundry.evaluate.verdict import Findings, check_consistency, check_input_use, check_probes, check_trials, decode


def judge_outputs(f: Findings, out: JobOutcome, job: Job, references: dict, *, launch_key: str | None,
                  allow_torch_ops: bool, reference_ops: frozenset, atol: float, rtol: float) -> None:
    """Every trial's output against its reference, then the repeat, the probes and
    the protocol: guard flags and the stage go into `f`."""
    trials = {m.header.get("index"): m for m in out.of_kind("trial")}
    check_trials(f, trials, references, job.trials, atol=atol, rtol=rtol, launch_key=launch_key,
                 allow_torch_ops=allow_torch_ops, reference_ops=reference_ops)
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
