"""The profiling step's report: what one candidate job measured beside its verdict.

`job_metrics` gathers a result's metrics from the job's outcome (the worker's wall time,
the device gate's waits, transfers, memory, the worker's own split of its start and of
its trials) and, on CUDA, `kernel_profile`: the device profiler's view of the one trial
it watched. Metrics only: nothing here decides a verdict.
"""

from __future__ import annotations

from foundry.evaluate.job import Job
from foundry.evaluate.phases import worker_start_parts
from foundry.evaluate.reference import output_dtype
from foundry.evaluate.sandbox import JobOutcome


def job_metrics(out: JobOutcome, job: Job, references: dict, *, transfer_note: str = "") -> dict:
    """A judged candidate job's metrics; `transfer_note`: why outputs came through the host."""
    metrics: dict = {"worker_wall_s": out.wall_s, "output_dtype": str(output_dtype(references[0])),
                     "device_gate_s": {"waited": round(out.device_wait_s, 4), "stopped": round(out.stopped_s, 4)},
                     "full_size_trials": len(job.main_trials), "trials_run": len(job.trials),
                     "transfer_bytes": dict(out.transfer), "memory_cap_mb": out.memory_cap_mb,
                     "worker_peak_rss_mb": round(out.peak_rss_mb, 1)}
    if out.forked_ahead:
        metrics["forked_ahead"] = True
    if transfer_note:
        metrics["transfer_note"] = transfer_note
    if job.paired_trials:  # the differential check of inputs the output depends on within the tolerance
        metrics["differential_inputs"] = [job.trials[p].redraw for p in job.paired_trials]
    kernels = kernel_profile(out)
    if kernels:
        metrics["kernels"] = kernels
    metrics["worker_start_parts_s"] = worker_start_parts(out)
    repeat = out.of_kind("repeat")
    parts = repeat[0].header.get("trial_parts") if repeat else None
    if isinstance(parts, dict):  # the worker's own split of the "trials" phase (metrics only)
        metrics["trial_parts_s"] = {str(k): round(float(v), 4) for k, v in parts.items()
                                    if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return metrics


def kernel_profile(out: JobOutcome) -> dict | None:
    """The device profiler's view of the one trial it watched (CUDA): how many of the
    candidate's own kernels ran, their share of device time, and each kernel's device time
    and launches, slowest first; None where no trial was profiled (the CPU)."""
    for m in out.of_kind("trial"):
        profiled = m.header.get("profiled")
        if isinstance(profiled, dict):
            return {k: profiled[k] for k in ("own_kernels", "own_time_fraction", "kernel_times_us") if k in profiled}
    return None


def compile_seconds(out: JobOutcome) -> float:
    """The build's time as the worker reported it (0 where it reported none)."""
    compiled = out.of_kind("compiled")
    value = compiled[0].header.get("compile_s", 0.0) if compiled else 0.0
    return float(value) if isinstance(value, (int, float)) else 0.0
