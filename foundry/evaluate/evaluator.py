"""The Evaluator: judges one candidate against one task (see the package docstring).

One evaluation, as named steps (each timed into `metrics["phases"]`, see phases.py), each
in a module of its own; this class orchestrates them and owns what they share (the warm
worker, the device gate, the task setup, the reference runner):

- setup: admit (backend, device: admission.py; static checks: static_checks.py), then the
  task's first-time setup (sizes, reference ops, degeneracy and its differential inputs,
  which the job's trials follow: task_setup.py, degeneracy.py);
- run: the candidate's job (jobs.py builds it, job_plan.py plans it) in the sandbox;
- build: triage of a job that failed before its outputs (triage.py);
- correctness: reference outputs (reference.py), then comparison and guards (correctness.py);
- timing: the timed runs' outputs and clocks (timed_runs.py);
- scoring: baselines (baseline_step.py) and speedups (scoring.py), a large one rechecked
  (recheck.py);
- profiling: the job's metrics and kernel profile (job_metrics.py).
Screening (screen_step.py) is the same for every setting of a TUNABLE, in one job.
"""

from __future__ import annotations

import dataclasses
import importlib
import secrets
import time
from typing import Any, Sequence

from foundry.evaluate import isolation
from foundry.evaluate.admission import Refusal, admit_backend, static_refusal
from foundry.evaluate.backends import BackendSpec
from foundry.evaluate.baseline_step import BaselineStep
from foundry.evaluate.baselines import Baseline
from foundry.evaluate.config import EvalConfig
from foundry.evaluate.correctness import idle_reply, judge_outputs, release_judged_trials
from foundry.evaluate.device import get_device
from foundry.evaluate.device_gate import DeviceGate
from foundry.evaluate.device_memory import (OOM_RETRY_WAIT_S, WorkerOutOfMemory, judge_out_of_memory, release,
                                            reserved)
from foundry.evaluate.job import Job
from foundry.evaluate.job_metrics import compile_seconds, job_metrics
from foundry.evaluate.job_plan import memory_caps
from foundry.evaluate.jobs import candidate_job, compiler_caches
from foundry.evaluate.phases import PhaseTimes, worker_phases
from foundry.evaluate.recheck import judge_recheck
from foundry.evaluate.reference import ReferenceRunner
from foundry.evaluate.sandbox import JobOutcome, run_job
from foundry.evaluate.scoring import Judged, score
from foundry.evaluate.screen_step import ScreenStep, refused
from foundry.evaluate.secrets import Scrubber, truncate
from foundry.evaluate.static_checks import check_source
from foundry.evaluate.task_setup import TaskSetup
from foundry.evaluate.task_size import TaskTooLarge
from foundry.evaluate.timed_runs import check_timed_runs
from foundry.evaluate.triage import timed_runs_error, triage
from foundry.evaluate.verdict import Findings
from foundry.evaluate.warm_worker import WarmWorker, warm_worker_for
from foundry.types import TASK_TOO_LARGE, Candidate, EvalResult, ScreenedPoint, Stage, Task


class Evaluator:
    """Keeps a warm sandbox worker; reuse one Evaluator for many evaluations.

    `gate`: shared by the Evaluators (lanes) that evaluate on one device at once, each
    from its own thread (see device_gate.py); alone, an Evaluator has a gate of its own."""

    def __init__(self, *, config: EvalConfig | None = None, gate: DeviceGate | None = None,
                 backends: Sequence[str] = (), worker: WarmWorker | None = None):
        """`backends`: those the candidates will use (e.g. ("triton",)): the warm worker
        imports their modules as it starts, not at the first candidate (any backend still
        works; an unnamed one is imported when first needed). `worker`: the warm worker
        `warm_worker_for(config, backends=backends)` gave, already launched (it is then
        this Evaluator's to close)."""
        self.config = config or EvalConfig()
        self.gate = gate if gate is not None else DeviceGate()
        self.device = get_device(self.config.device)
        # a worker started early by the caller (`warm_worker_for(config, backends=...)`), or ours
        self._worker = worker if worker is not None else warm_worker_for(self.config, backends=backends)
        self._importer = None  # CUDA outputs come device-to-device when this works
        self.transfer_note = ""
        if self.config.device == "cuda":
            try:
                from foundry.evaluate.cuda_ipc import IpcImporter
                self._importer = IpcImporter()
            except Exception as e:  # noqa: BLE001 - outputs then come through the host
                self.transfer_note = f"CUDA IPC unavailable ({type(e).__name__}: {e}); outputs via the host"
        self._scrub = Scrubber.from_environ(self.config.secret_env_names)
        self._reference = ReferenceRunner(self.device)
        self._setup = TaskSetup(config=self.config, reference=self._reference, gate=self.gate)
        self.hardware = self.device.hardware_id(self.config.threads)
        self._baselines = BaselineStep(config=self.config, hardware=self.hardware, gate=self.gate,
                                       clean=self._clean)
        self._screens = ScreenStep(config=self.config, gate=self.gate, setup=self._setup, worker=self._worker,
                                   clean=self._clean, release=self._release_device_memory)
        self.isolated = self.config.isolation != "none" and isolation.available()
        if self.config.isolation == "required" and not self.isolated:
            raise RuntimeError("EvalConfig.isolation='required' but this process may not create "
                               "namespaces (run as root or with CAP_SYS_ADMIN)")
        try:  # imported now, before any candidate runs, never lazily afterwards
            importlib.import_module("foundry.tasks.degeneracy")
        except ImportError:
            pass
        self._worker.launch()  # its imports overlap the judge's own first-task setup

    # ---------------------------------------------------------------- public
    def evaluate(self, *, task: Task, candidate: Candidate) -> EvalResult:
        """Judge `candidate` on `task`. Never raises for a bad candidate."""
        t0 = time.monotonic()
        phases = PhaseTimes()
        retried = ""
        try:
            try:
                result = self._evaluate(task, candidate, t0, phases)
            except Exception as e:  # noqa: BLE001 - only running out of device memory is retried
                if not judge_out_of_memory(e):
                    raise
                retried = f"{type(e).__name__}: {e}"[:300]
            if retried:
                # the judge, or the worker beside other lanes' evaluations, ran out of device
                # memory (the estimates do not count everything): not the candidate's fault.
                # Out of the except clause now, whose traceback kept the first try's frames
                # and the outputs and references they held (GBs each) alive: its blocks go
                # back, and once the reservations held now have ended, it is judged again
                # from the start with the device's memory reserved whole; running out then
                # is its verdict.
                with phases.measure("device_memory_wait"):
                    self._release_device_memory(wait=True)
                    self.gate.wait_for_reservations(timeout_s=OOM_RETRY_WAIT_S)
                result = self._evaluate(task, candidate, time.monotonic(), phases, whole_device=True)
        except Exception as e:  # noqa: BLE001 - a judge failure still yields a (failed) result
            result = self._result(task, candidate, t0, Stage.RUNTIME, flags=("evaluator_error",),
                                  error=f"evaluator error: {type(e).__name__}: {e}")
        with phases.measure("release"):
            self._release_device_memory()
        extra = {"judge_out_of_memory_retried": retried} if retried else {}
        return dataclasses.replace(result, eval_s=time.monotonic() - t0,
                                   metrics={**result.metrics, **extra, "phases": phases.as_dict()})

    def screen(self, *, task: Task, candidate: Candidate, points: Sequence[dict]) -> tuple[ScreenedPoint, ...]:
        """Build, check once and time every setting in `points` of `candidate`'s TUNABLE
        in one sandbox job; one advisory `ScreenedPoint` per point, in order. Only a full
        `evaluate` of a chosen setting is a verdict."""
        points = tuple(dict(p) for p in points)
        if not points:
            return ()
        backend, static, failed = self._admit(task, candidate, time.monotonic(), PhaseTimes())
        if failed is not None or static.flags:
            return refused(points, failed.error if failed is not None else "; ".join(static.reasons.values()))
        try:
            ref_ops = self._task_setup(task)
        except TaskTooLarge as e:
            return refused(points, str(e))
        return self._screens.guarded(lambda: self._screen_job(task, candidate, points, backend, ref_ops),
                                     task=task, candidate=candidate, points=points)

    def _screen_job(self, task: Task, candidate: Candidate, points: tuple, backend: BackendSpec,
                    ref_ops: frozenset) -> tuple[ScreenedPoint, ...]:
        atol, rtol = self._tolerance(task)
        return self._screens.screen(task, candidate, points, backend, ref_ops, atol=atol, rtol=rtol, run=self._run,
                                    reference=lambda job: self._reference_outputs(task, job, [0])[0])

    def baselines(self, *, task: Task) -> tuple[float | None, float | None]:
        """(eager_ms, compile_ms) of the task's reference, cached on disk."""
        b = self._baseline(task)
        return b.eager_ms, b.compile_ms

    def baseline(self, *, task: Task, measure: bool = True) -> Baseline | None:
        """The task's whole baseline record (times, compile time, error, and on a GPU the
        kernels one forward of each launched), cached on disk; with `measure` False, the
        cached record alone (None where there is none)."""
        if not measure:
            return self._baselines.cached(self._baselines.key(task))
        return self._baseline(task)

    def close(self) -> None:
        self._worker.close()

    def __enter__(self) -> "Evaluator":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---------------------------------------------------------------- the evaluation, step by step
    def _evaluate(self, task: Task, cand: Candidate, t0: float, phases: PhaseTimes, *,
                  whole_device: bool = False) -> EvalResult:
        """`whole_device`: reserve all the device memory the lanes share (a second try after
        running out of it)."""
        backend, static, failed = self._admit(task, cand, t0, phases)
        if failed is not None:
            return failed
        f = Findings()
        for name in static.flags:
            f.flag(name, f"static check: {static.reasons[name]}")
        try:
            ref_ops = self._task_setup(task, phases)
        except TaskTooLarge as e:
            return self._result(task, cand, t0, Stage.RUNTIME, flags=("task_error", TASK_TOO_LARGE), error=str(e))
        job = self._candidate_job(task, cand, backend, redraw=self._differential_inputs(task, phases))
        nbytes = self.gate.capacity_bytes if whole_device and self.gate.capacity_bytes else self._device_bytes(task)
        with reserved(self.gate, nbytes, phases):
            if whole_device:  # what any lane left cached in the judge goes before the second try runs
                self._release_device_memory(wait=True)
            judged = self._run_and_judge(task, cand, t0, job, backend, f, ref_ops, phases,
                                         retry_out_of_memory=not whole_device)
        if isinstance(judged, EvalResult):  # it failed before its outputs could be judged
            return judged
        metrics, runtime, spread = judged.metrics, judged.runtime_ms, judged.spread
        result_kw: dict = {"max_abs_err": f.max_abs_err, "max_rel_err": f.max_rel_err,
                           "compile_s": judged.compile_s}
        if f.stage == Stage.CORRECT and not f.flags and runtime:
            runtime, spread = self._score(task, cand, backend, f, runtime, spread, metrics, result_kw, phases)
        result_kw.update(runtime_ms=runtime, runtime_spread=spread, metrics=metrics)
        return self._result(task, cand, t0, f.stage, flags=f.flags, error="\n".join(f.errors), **result_kw)

    def _run_and_judge(self, task: Task, cand: Candidate, t0: float, job: Job, backend: BackendSpec,
                       f: Findings, ref_ops: frozenset, phases: PhaseTimes, *,
                       retry_out_of_memory: bool = False) -> "EvalResult | Judged":
        """The candidate's job, then the judge's look at its outputs: a failed EvalResult,
        or what scoring needs. `retry_out_of_memory`: a worker that ran out of device
        memory raises WorkerOutOfMemory (no verdict yet: other lanes' work may have taken it)."""
        out = self._run(job, deadline_s=self.config.timeout_s, stop_early=bool(f.flags),
                        reference_ops=ref_ops, task=task)
        phases.merge(worker_phases(out, ended_at=time.monotonic()))
        # the worker is dead now: only from here on do reference outputs exist
        common = {"compile_s": compile_seconds(out), "metrics": {"worker_wall_s": out.wall_s}}
        failed = triage(out, job, f, memory_mb=self.config.memory_mb)
        if failed is not None and failed.out_of_memory and retry_out_of_memory:
            lines = failed.error.splitlines()
            out.drop_tensors()  # the outputs received so far: not held through the second try
            raise WorkerOutOfMemory(next((line for line in reversed(lines) if "out of memory" in line), "")[:300])
        if failed is not None:
            return self._result(task, cand, t0, failed.stage, flags=failed.flags, error=failed.error, **common)
        timed_failed = timed_runs_error(out)
        if timed_failed is not None and timed_failed.out_of_memory and retry_out_of_memory:
            out.drop_tensors()  # every trial's output and the repeat's: not held through the second try
            raise WorkerOutOfMemory(timed_failed.last_line())
        with self.gate.shared():  # the judge's device work, never during another lane's timing
            return self._judge(task, job, out, backend, f, ref_ops, phases, common)

    def _judge(self, task: Task, job: Job, out: JobOutcome, backend: BackendSpec, f: Findings,
               ref_ops: frozenset, phases: PhaseTimes, common: dict) -> "Judged":
        """References, degeneracy, the trials' outputs and the timed outputs; the guards'
        findings go into `f`."""
        with phases.measure("references"):
            references = self._reference_outputs(task, job, range(len(job.trials)))
        atol, rtol = self._tolerance(task)
        # known since before the job (its differential inputs planned the paired trials)
        degenerate = self._setup.degeneracy(task, [references[i] for i in job.main_trials], atol=atol, rtol=rtol)
        if degenerate.degenerate:
            f.flag("degenerate_task", f"degenerate task: {degenerate.reason}")
        with phases.measure("compare"):
            judge_outputs(f, out, job, references, launch_key=backend.launch_key,
                          allow_torch_ops=self.config.allow_torch_ops, reference_ops=ref_ops, atol=atol, rtol=rtol,
                          precise=self._precise(task, job, references))
        metrics = job_metrics(out, job, references, transfer_note=self.transfer_note)
        if "task_setup" in phases.seconds:  # this evaluation paid for the task's setup
            metrics["task_setup_parts_s"] = dict(self._setup.parts.get(task.source_hash, {}))
        if degenerate.override:
            metrics["degeneracy_overridden"] = degenerate.override
        runtime = spread = None
        if f.stage == Stage.CORRECT and not f.flags:
            timing_msgs = out.of_kind("timing")
            if not timing_msgs:
                timed_failed = timed_runs_error(out)
                why = out.exit_text() if timed_failed is None else "its timed runs failed: " + timed_failed.last_line()
                f.lower(Stage.RUNTIME, "the worker ended before its timed runs finished: " + why)
            else:
                release_judged_trials(f, out, job, references)
                with phases.measure("timed_output_check"):
                    runtime, spread = check_timed_runs(f, out, timing_msgs[0], references, job, metrics,
                                                       atol=atol, rtol=rtol, rescaled=self._rescaled(task, job),
                                                       precise=self._precise(task, job, references))
        if f.float64_trials:
            metrics["float64_reference_trials"] = sorted(f.float64_trials)
        del references
        # judged: the received outputs, and those decoded into `f` (still there where
        # release_judged_trials did not run: a failed or flagged job, timed runs that
        # failed), go before the device is cleaned, inside this shared section: it runs now
        f.candidate_outputs.clear()
        out.drop_tensors()
        self._release_device_memory()
        return Judged(metrics=metrics, runtime_ms=runtime, spread=spread, compile_s=common["compile_s"])

    def _admit(self, task: Task, cand: Candidate, t0: float, phases: PhaseTimes) -> tuple:
        """(backend, static check result, None) when the candidate may run here; else
        (None, None, its failed result)."""
        cfg = self.config
        backend = admit_backend(cand, device=cfg.device)
        if isinstance(backend, Refusal):
            return None, None, self._result(task, cand, t0, backend.stage, error=backend.error)
        with phases.measure("static_checks"):
            static = check_source(cand.source, backend=backend, allow_torch_ops=cfg.allow_torch_ops,
                                  allow_precision_drop=cfg.allow_precision_drop, task_source=task.source,
                                  device_patterns=self.device.static_patterns())
        refused = static_refusal(static)
        if refused is not None:
            return None, None, self._result(task, cand, t0, refused.stage, error=refused.error)
        return backend, static, None

    def _score(self, task: Task, cand: Candidate, backend: BackendSpec, f: Findings, runtime: float,
               spread: float | None, metrics: dict, result_kw: dict, phases: PhaseTimes):
        """Speedups against the task's baselines (scoring.score), rechecked where large."""
        return score(f, self._baseline(task, phases), runtime, spread, metrics, result_kw, phases=phases,
                     recheck_threshold=self.config.speedup_recheck_threshold,
                     recheck=lambda r, s: self._recheck(task, cand, backend, f, r, s, metrics))

    def _recheck(self, task: Task, cand: Candidate, backend: BackendSpec, f: Findings, runtime: float,
                 spread: float | None, metrics: dict):
        """A suspiciously large speedup: judge again in a fresh worker on new inputs, with
        the device to itself for the whole job, and keep the slower time."""
        metrics["speedup_rechecked"] = True
        ref_ops = self._task_setup(task)
        job = self._candidate_job(task, cand, backend, base=secrets.randbits(48),
                                  redraw=self._differential_inputs(task))
        with self.gate.memory(self._device_bytes(task)), self.gate.exclusive():
            return self._recheck_job(task, job, backend, f, runtime, spread, metrics, ref_ops)

    def _recheck_job(self, task: Task, job: Job, backend: BackendSpec, f: Findings, runtime: float,
                     spread: float | None, metrics: dict, ref_ops: frozenset):
        cfg = self.config
        out = self._run(job, deadline_s=cfg.timeout_s, reference_ops=ref_ops, task=task)
        atol, rtol = self._tolerance(task)
        return judge_recheck(f, out, job, runtime=runtime, spread=spread, metrics=metrics,
                             references=lambda: self._reference_outputs(task, job, range(len(job.trials))),
                             rescaled=self._rescaled(task, job), launch_key=backend.launch_key,
                             allow_torch_ops=cfg.allow_torch_ops, reference_ops=ref_ops, atol=atol, rtol=rtol,
                             precise=self._precise(task, job, {}))

    # ---------------------------------------------------------------- shared helpers
    def _reference_outputs(self, task: Task, job: Job, indices, *, scale: float = 1.0) -> dict[int, Any]:
        return self._reference.job_outputs(task, job, indices, scale=scale)

    def _precise(self, task: Task, job: Job, references: dict):
        """(trial index, scale) -> that trial's reference output computed in float64, cast to
        the reference's dtypes (None where there is none): verdict.check_trials."""
        def precise(i: int, scale: float):
            like = references.get(i)
            if like is None:  # let go after the trials were judged: the trial's output is computed again
                like = self._reference_outputs(task, job, [i])[i]
            return self._reference.precise_output(task, job, i, like, scale=scale)
        return precise

    def _rescaled(self, task: Task, job: Job):
        """(trial index, scale) -> the reference output of that trial on its inputs times scale."""
        return lambda i, scale: self._reference_outputs(task, job, [i], scale=scale)[i]

    def _tolerance(self, task: Task) -> tuple[float, float]:
        cfg = self.config
        return (cfg.atol if cfg.atol is not None else task.atol,
                cfg.rtol if cfg.rtol is not None else task.rtol)

    def _candidate_job(self, task: Task, cand: Candidate, backend: BackendSpec, *, base: int | None = None,
                       redraw: tuple = ()) -> Job:
        """`redraw`: the task's differential inputs (one paired trial each)."""
        cfg = self.config
        if base is None:
            base = cfg.seed if cfg.seed is not None else secrets.randbits(48)
        sizes = self._setup.size_of(task)
        self._worker.ensure_preloaded(backend.preload)
        return candidate_job(task, cand, backend, cfg, sizes=sizes, base=base, redraw=redraw,
                             timing_sets=self._setup.timing_sets(task))

    def _differential_inputs(self, task: Task, phases: PhaseTimes | None = None) -> tuple[int, ...]:
        """The inputs of `task` its candidates' jobs redraw in a paired trial each: those
        its degeneracy verdict (computed now the first time, before any job is planned)
        names, none for a degenerate task or where the check could not run."""
        atol, rtol = self._tolerance(task)
        verdict = self._setup.degeneracy_before(task, atol=atol, rtol=rtol, phases=phases)
        return verdict.differential_inputs if verdict is not None and not verdict.degenerate else ()

    def _run(self, job: Job, *, deadline_s: float, task: Task, stop_early: bool = False,
             reference_ops: frozenset = frozenset(), on_message=None) -> JobOutcome:
        cfg = self.config
        cap, max_bytes = memory_caps(cfg, self._setup.size_of(task), job)

        def on_idle(out: JobOutcome) -> bytes:
            return idle_reply(out, stop_early=stop_early, strict=not cfg.allow_torch_ops, reference_ops=reference_ops)

        untrusted = job.kind != "baseline"
        # a candidate's idles are probed for hidden work; a screen's (advisory) idles only
        # pass the device between timed points
        probe_ms = cfg.idle_probe_ms if job.kind == "candidate" else 0.0
        return run_job(self._worker, job, deadline_s=deadline_s, memory_mb=cap,
                       idle_probe_ms=probe_ms, max_bytes=max_bytes, importer=self._importer,
                       isolate=self.isolated and untrusted, address_cap=cfg.device != "cuda",
                       on_idle=on_idle if job.kind == "candidate" else (lambda o: b"g"),
                       on_message=on_message, cache_env=compiler_caches(trusted=not untrusted),
                       gate=self.gate, timed_idles=True,
                       # a child forked ahead (no address cap: a GPU's jobs) for candidates and
                       # screens only: a trusted baseline job leaves the one waiting for them
                       standby=cfg.standby and untrusted)

    def _device_bytes(self, task: Task) -> int:
        """Device memory one evaluation of `task` reserves on the gate (cuda only)."""
        return self._setup.evaluation_bytes(task) if self.config.device == "cuda" else 0

    def _clean(self, text: str) -> str:
        return truncate(self._scrub(text or ""), self.config.max_error_chars)

    def _result(self, task: Task, cand: Candidate, t0: float, stage: Stage, **kw: Any) -> EvalResult:
        kw["error"] = self._clean(kw.get("error", ""))
        kw["flags"] = tuple(kw.get("flags", ()))
        if kw["flags"] and stage == Stage.CORRECT:
            stage = Stage.VALUE  # a guard fired: never "correct"
        return EvalResult(candidate_id=cand.candidate_id, task_id=task.task_id, stage=int(stage),
                          correct=stage == Stage.CORRECT and not kw["flags"],
                          eval_s=time.monotonic() - t0, hardware=self.hardware,
                          device=self.config.device, **kw)

    def _release_device_memory(self, *, wait: bool = False) -> None:
        """cuda: the judge's free cached blocks given back (device_memory.release), at once
        where the gate's shared section is free, else not; `wait`: in a shared section
        waited for (after another lane's timed section), so that it runs."""
        if self.config.device != "cuda":
            return
        if wait:
            with self.gate.shared():
                release(self.gate)
        else:
            release(self.gate)

    # ---------------------------------------------------------------- once per task
    @property
    def _sizes(self) -> dict[str, tuple[int, int]]:
        return self._setup.sizes

    def _task_setup(self, task: Task, phases: PhaseTimes | None = None) -> frozenset:
        return self._setup.reference_ops(task, phases)

    def _baseline(self, task: Task, phases: PhaseTimes | None = None) -> Baseline:
        return self._baselines.baseline(task, phases or PhaseTimes(), prepare=self._task_setup, run=self._run,
                                        device_bytes=self._device_bytes)
