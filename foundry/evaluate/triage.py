"""The build step's verdict: did the candidate's job get as far as its outputs?

A job that failed before all its trials were reported failed at the task itself (in the
worker), at the build (no "compiled" message: Stage.COMPILE) or at a trial (Stage.RUNTIME);
`triage` says which, with the worker's error, its output's tail and, where memory ran
out, the host-memory cap that applied. Runtime compiles the worker's compile guard
caught are flagged here too, whatever else happened. A job whose trials all came back but
whose timed runs failed is not triage's: `timed_runs_error` gives the worker's error from
them (the judge says it, and tries again an evaluation whose timed runs ran out of device
memory).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from foundry.evaluate.job import Job
from foundry.evaluate.sandbox import JobOutcome
from foundry.evaluate.verdict import Findings
from foundry.types import Stage

ALLOC_FAILED = re.compile(r"can't allocate memory|MemoryError|Cannot allocate memory|std::bad_alloc")


@dataclass(frozen=True)
class JobFailure:
    """What a failed job's result says: its stage, flags and error text."""

    stage: Stage
    flags: tuple
    error: str
    out_of_memory: bool = False  # the worker's device ran out of memory (its error says so)


def triage(out: JobOutcome, job: Job, f: Findings, *, memory_mb: float) -> JobFailure | None:
    """The failure of a job that failed before all its trials were reported (the task
    itself, the build, or a trial), else None. `memory_mb`: EvalConfig.memory_mb."""
    errors = out.of_kind("error")
    for m in errors:  # the worker's compile guard caught a compile at run time (compile_guard)
        if m.header.get("flag") == "runtime_compile":
            f.flag("runtime_compile", str(m.header.get("error", ""))[:500])
    out_of_memory = any(m.header.get("out_of_memory") is True for m in errors)
    if errors and errors[0].header.get("stage") == "task":
        return JobFailure(Stage.RUNTIME, ("task_error",),
                          "the task failed in the worker:\n" + str(errors[0].header.get("error")),
                          out_of_memory=out_of_memory)
    compiled = out.of_kind("compiled")
    trials = {m.header.get("index") for m in out.of_kind("trial")}
    if compiled and len(trials) >= len(job.trials):
        return None
    stage = Stage.COMPILE if not compiled else Stage.RUNTIME
    if errors:
        text = str(errors[0].header.get("error", ""))[-6000:]
    else:
        text = out.protocol_error or out.exit_text()
        if out.protocol_error:
            f.flag("protocol_violation", out.protocol_error)
    if not out.memory_exceeded and ALLOC_FAILED.search(text):
        text += (f"\n(the worker's host-memory cap of {out.memory_cap_mb:.0f} MB: EvalConfig.memory_mb="
                 f"{memory_mb}, raised for large tasks)")
    log = out.log.strip()
    if log:
        text += "\n--- worker output (tail) ---\n" + log[-2000:]
    f.errors.insert(0, text)
    return JobFailure(stage, tuple(f.flags), "\n".join(f.errors), out_of_memory=out_of_memory)


@dataclass(frozen=True)
class TimedRunsError:
    """The error the worker sent when its timed runs failed, after every trial."""

    error: str  # the worker's traceback
    out_of_memory: bool  # the device ran out of memory

    def last_line(self) -> str:
        lines = [ln.strip() for ln in self.error.splitlines() if ln.strip()]
        return lines[-1][:300] if lines else "no error text"


def timed_runs_error(out: JobOutcome) -> TimedRunsError | None:
    """The worker's error from its timed runs, if it sent one."""
    for m in out.of_kind("error"):
        if m.header.get("phase") == "timing":
            return TimedRunsError(str(m.header.get("error", "")), m.header.get("out_of_memory") is True)
    return None
