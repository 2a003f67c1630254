"""The Evaluator: judges one candidate against one task (see the package docstring)."""

from __future__ import annotations

import importlib
import os
import re
import secrets
import time
from typing import Any

from foundry.evaluate import isolation, protocol
from foundry.evaluate.backends import get_backend
from foundry.evaluate.baselines import Baseline, BaselineCache, baseline_key
from foundry.evaluate.compare import compare
from foundry.evaluate.config import EvalConfig
from foundry.evaluate.degeneracy import Degeneracy, external_check, minimal_check
from foundry.evaluate.device import get_device
from foundry.evaluate.reference import ReferenceRunner, output_dtype
from foundry.evaluate.sandbox import JobOutcome, WarmWorker, run_job
from foundry.evaluate.secrets import Scrubber, clean_env, truncate
from foundry.evaluate.static_checks import check_source
from foundry.evaluate.timing_report import analyze
from foundry.evaluate.trial_inputs import small_sizes, tensor_bytes
from foundry.evaluate.verdict import (Findings, check_consistency, check_probes, check_trials, decode,
                                      torch_compute_violation)
from foundry.tasks.inputs import InputSpec, trial_plan
from foundry.types import Candidate, EvalResult, Stage, Task

TIMING_SETS = 3
_ALLOC_FAILED = re.compile(r"can't allocate memory|MemoryError|Cannot allocate memory|std::bad_alloc")
BASELINE_SEED = 20240601


class Evaluator:
    """Keeps a warm sandbox worker; reuse one Evaluator for many evaluations."""

    def __init__(self, *, config: EvalConfig | None = None):
        self.config = config or EvalConfig()
        self.device = get_device(self.config.device)
        env = clean_env(os.environ, self.config.secret_env_names)
        env.update(self.device.worker_env(self.config.threads))
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        if self.config.device == "cuda":
            env["FOUNDRY_TF32"] = self.config.tf32
        self._worker = WarmWorker(env=env, preload=("foundry.kernels", "foundry.kernels.c"))
        self._importer = None  # CUDA outputs come device-to-device when this works
        self.transfer_note = ""
        if self.config.device == "cuda":
            try:
                from foundry.evaluate.cuda_ipc import IpcImporter
                self._importer = IpcImporter()
            except Exception as e:  # noqa: BLE001 - outputs then come through the host
                self.transfer_note = f"CUDA IPC unavailable ({type(e).__name__}: {e}); outputs via the host"
        self._sizes: dict[str, tuple[int, int]] = {}  # task -> (input bytes, output bytes) per trial
        self._scrub = Scrubber.from_environ(self.config.secret_env_names)
        self._reference = ReferenceRunner(self.device)
        self._baselines = BaselineCache(self.config.baseline_cache_dir)
        self._degeneracy: dict[str, Degeneracy] = {}
        self._ref_ops: dict[str, frozenset] = {}
        self.hardware = self.device.hardware_id(self.config.threads)
        self.isolated = self.config.isolation != "none" and isolation.available()
        if self.config.isolation == "required" and not self.isolated:
            raise RuntimeError("EvalConfig.isolation='required' but this process may not create "
                               "namespaces (run as root or with CAP_SYS_ADMIN)")
        try:  # imported now, before any candidate runs, never lazily afterwards
            importlib.import_module("foundry.tasks.degeneracy")
        except ImportError:
            pass

    # ---------------------------------------------------------------- public
    def evaluate(self, *, task: Task, candidate: Candidate) -> EvalResult:
        """Judge `candidate` on `task`. Never raises for a bad candidate."""
        t0 = time.monotonic()
        try:
            return self._evaluate(task, candidate, t0)
        except Exception as e:  # noqa: BLE001 - a judge failure still yields a (failed) result
            return self._result(task, candidate, t0, Stage.RUNTIME, flags=("evaluator_error",),
                                error=f"evaluator error: {type(e).__name__}: {e}")
        finally:
            self._release_device_memory()

    def _release_device_memory(self) -> None:
        """cuda: the references and received outputs of this evaluation are garbage now;
        overwrite the judge's free cached blocks (0xFF) and give them back to the driver, so
        neither an old result nor the memory itself is left for the next worker."""
        if self.config.device != "cuda":
            return
        try:
            import gc

            import torch

            from foundry.evaluate.cuda_device import poison_free_memory
            gc.collect()
            poison_free_memory()
            torch.cuda.empty_cache()
        except Exception:  # noqa: BLE001 - housekeeping only
            pass

    def baselines(self, *, task: Task) -> tuple[float | None, float | None]:
        """(eager_ms, compile_ms) of the task's reference, cached on disk."""
        b = self._baseline(task)
        return b.eager_ms, b.compile_ms

    def close(self) -> None:
        self._worker.close()

    def __enter__(self) -> "Evaluator":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---------------------------------------------------------------- helpers
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

    def _caps(self, task: Task, job: dict) -> tuple[int, int]:
        """(host-memory cap in MB, result-channel cap in bytes) for `job` on `task`: the
        configured cap (the worker's own allowance) plus the host memory the job's trials
        need for the task's data."""
        cfg = self.config
        in_b, out_b = self._sizes.get(task.source_hash, (0, 0))
        trials = job.get("trials") or []
        full = sum(1 for p in trials if p.get("variant") == 0)
        sets = len((job.get("timing") or {}).get("sets") or [])
        mib = 1 << 20
        if cfg.device == "cpu":  # inputs built ahead, repeat and timing sets, outputs in flight
            extra = 1.25 * (in_b * (full + 1 + sets) + out_b * (3 + sets)) / mib
        else:  # inputs live on the GPU; outputs cross the host only where IPC is unavailable
            extra = 2.0 * out_b / mib
        cap = int(cfg.memory_mb + extra)
        messages = len(trials) + 1 + sets
        max_bytes = int(max(max(64, cap) * mib, 1.1 * out_b * messages + 64 * mib))
        return cap, max_bytes

    def _run(self, job: dict, *, deadline_s: float, stop_early: bool,
             reference_ops: frozenset = frozenset(), task: Task | None = None) -> JobOutcome:
        cfg = self.config
        cap, max_bytes = self._caps(task, job) if task is not None else (cfg.memory_mb, max(64, cfg.memory_mb) << 20)

        def on_idle(out: JobOutcome) -> bytes:
            strict = not cfg.allow_torch_ops

            def bad_ops(h: dict) -> bool:
                ops = h.get("torch_ops")
                return bool(ops) and isinstance(ops, dict) and bool(
                    torch_compute_violation(set(map(str, ops)), set(reference_ops)))

            if stop_early or any((strict and (bad_ops(m.header) or m.header.get("launches") == 0))
                                 or m.header.get("inputs_changed") for m in out.of_kind("trial")):
                return b"s"
            return b"g"

        return run_job(self._worker, job, deadline_s=deadline_s, memory_mb=cap,
                       idle_probe_ms=cfg.idle_probe_ms, max_bytes=max_bytes, importer=self._importer,
                       isolate=self.isolated and job["kind"] == "candidate",
                       address_cap=cfg.device != "cuda",
                       on_idle=on_idle if job["kind"] == "candidate" else (lambda o: b"g"))

    def _job(self, task: Task, cand: Candidate | None, plan: list, init_seed: int, *,
             timing: bool, backend=None) -> dict:
        cfg = self.config
        variants = self._variants(task)
        main = [i for i, p in enumerate(plan) if p["variant"] == 0]
        job = {"kind": "candidate" if cand else "baseline", "device": cfg.device, "threads": cfg.threads,
               "task": {"task_id": task.task_id, "path": task.path, "source": task.source,
                        "overrides": dict(task.size_overrides)},
               "variants": variants, "init_seed": init_seed, "trials": plan,
               "timing": {"sets": main[:TIMING_SETS], "params": {
                   "warmup_ms": cfg.warmup_ms, "min_ms": cfg.timing_min_ms,
                   "min_calls": cfg.timing_min_calls, "max_calls": cfg.timing_max_calls,
                   "block_ms": cfg.timing_block_ms, "tf32": cfg.tf32}} if timing else None}
        if timing and backend is not None and backend.name == "triton" and cfg.device == "cpu":
            # Triton's interpreter: correct, but far too slow for a real timing protocol
            job["timing"]["params"].update(min_calls=min(5, cfg.timing_min_calls),
                                           min_ms=min(50.0, cfg.timing_min_ms), warmup_ms=0.0)
        if cand is not None:
            job.update(source=cand.source, params=dict(cand.params), launch_key=backend.launch_key,
                       backend=backend.name,
                       worker_setup=backend.worker_setup, record_ops=not cfg.allow_torch_ops)
        else:
            job["compile_baseline"] = cfg.compile_baseline
        return job

    def _large(self, task: Task) -> bool:
        in_b, out_b = self._sizes.get(task.source_hash, (0, 0))
        return (in_b + out_b) > self.config.large_task_mb * (1 << 20)

    def _variants(self, task: Task) -> list[dict]:
        """Overrides per variant: 0 the task's own sizes, then its shape variants, then (for
        a large task) its SMALL_SIZES, where the trials beyond `full_size_trials` run."""
        variants = [{}] + (list(task.variants) if self.config.check_variants else [])
        if self._large(task) and self.config.trials > self.config.full_size_trials:
            small = small_sizes(task)
            if small:
                variants.append(small)
        return variants

    def _plan(self, task: Task, base: int) -> list[dict]:
        """Trials: `trials` at the task's size (at most `full_size_trials` of them for a
        large task: one standard and one heavy-tailed, so 'different inputs, different
        answers' still holds there; the rest run at SMALL_SIZES), two per shape variant."""
        cfg = self.config
        large = self._large(task)
        n_full = min(cfg.trials, cfg.full_size_trials) if large else cfg.trials
        plan = [{"seed": s.seed, "distribution": s.distribution, "variant": 0}
                for s in trial_plan(n_full, base)]
        if cfg.check_variants:
            for v in range(1, len(task.variants) + 1):
                for s in trial_plan(2, base + 1000003 * v):
                    plan.append({"seed": s.seed, "distribution": s.distribution, "variant": v})
        variants = self._variants(task)
        if len(variants) > 1 + (len(task.variants) if cfg.check_variants else 0):
            v = len(variants) - 1
            for s in trial_plan(cfg.trials - n_full, base + 7777771):
                plan.append({"seed": s.seed, "distribution": s.distribution, "variant": v})
        return plan

    # ---------------------------------------------------------------- the evaluation
    def _evaluate(self, task: Task, cand: Candidate, t0: float) -> EvalResult:
        cfg = self.config
        if not cand.source.strip():
            return self._result(task, cand, t0, Stage.SYNTAX, error=cand.note or "the candidate has no source")
        try:
            backend = get_backend(cand.backend)
        except ValueError as e:
            return self._result(task, cand, t0, Stage.SYNTAX, error=str(e))
        devices = ("cpu", "cuda") if backend.name == "triton" else (backend.device,)
        if cfg.device not in devices:
            return self._result(task, cand, t0, Stage.COMPILE,
                                error=f"backend {backend.name!r} runs on {backend.device}, "
                                      f"this evaluator on {cfg.device}")
        static = check_source(cand.source, backend=backend, allow_torch_ops=cfg.allow_torch_ops,
                              allow_precision_drop=cfg.allow_precision_drop, task_source=task.source,
                              device_patterns=self.device.static_patterns())
        if static.syntax_error:
            return self._result(task, cand, t0, Stage.SYNTAX, error=static.syntax_error)
        if "no_model_new" in static.flags:
            return self._result(task, cand, t0, Stage.COMPILE, error="the candidate defines no class ModelNew")
        f = Findings()
        for name in static.flags:
            f.flag(name, f"static check: {static.reasons[name]}")

        ref_ops = self._reference_ops(task)  # also measures the task's sizes, for the plan
        base = cfg.seed if cfg.seed is not None else secrets.randbits(48)
        plan = self._plan(task, base)
        init_seed = (base * 31 + 17) % (2**62)
        self._worker.ensure_preloaded(backend.preload)
        job = self._job(task, cand, plan, init_seed, timing=True, backend=backend)
        out = self._run(job, deadline_s=cfg.timeout_s, stop_early=bool(static.flags), reference_ops=ref_ops,
                        task=task)
        # the worker is dead now: only from here on do reference outputs exist
        compiled = out.of_kind("compiled")
        compile_s = compiled[0].header.get("compile_s", 0.0) if compiled else 0.0
        compile_s = float(compile_s) if isinstance(compile_s, (int, float)) else 0.0
        common = {"compile_s": compile_s, "metrics": {"worker_wall_s": out.wall_s}}
        errors = out.of_kind("error")
        if errors and errors[0].header.get("stage") == "task":
            return self._result(task, cand, t0, Stage.RUNTIME, flags=("task_error",),
                                error="the task failed in the worker:\n" + str(errors[0].header.get("error")),
                                **common)
        trials = {m.header.get("index"): m for m in out.of_kind("trial")}
        if not compiled or len(trials) < len(plan):
            stage = Stage.COMPILE if not compiled else Stage.RUNTIME
            if errors:
                text = str(errors[0].header.get("error", ""))[-6000:]
            else:
                text = out.protocol_error or out.exit_text()
                if out.protocol_error:
                    f.flag("protocol_violation", out.protocol_error)
            if not out.memory_exceeded and _ALLOC_FAILED.search(text):
                text += (f"\n(the worker's host-memory cap of {out.memory_cap_mb:.0f} MB: EvalConfig.memory_mb="
                         f"{cfg.memory_mb}, raised for large tasks)")
            log = out.log.strip()
            if log:
                text += "\n--- worker output (tail) ---\n" + log[-2000:]
            f.errors.insert(0, text)
            return self._result(task, cand, t0, stage, flags=f.flags, error="\n".join(f.errors), **common)

        # reference outputs, computed now that the candidate's process is gone
        models: dict[int, Any] = {}
        references: dict[int, Any] = {}
        for i, p in enumerate(plan):
            if p["variant"] not in models:
                overrides = job["variants"][p["variant"]]
                models[p["variant"]] = self._reference.model(task, overrides, init_seed)
            references[i] = self._reference.outputs(models[p["variant"]], task, job["variants"][p["variant"]],
                                                    InputSpec(p["seed"], p["distribution"]))
        dtype = output_dtype(references[0])
        atol = cfg.atol if cfg.atol is not None else task.atol
        rtol = cfg.rtol if cfg.rtol is not None else task.rtol
        main = [i for i, p in enumerate(plan) if p["variant"] == 0]
        degenerate = self._check_degenerate(task, [references[i] for i in main])
        if degenerate.degenerate:
            f.flag("degenerate_task", f"degenerate task: {degenerate.reason}")

        check_trials(f, trials, references, plan, atol=atol, rtol=rtol, launch_key=backend.launch_key,
                     allow_torch_ops=cfg.allow_torch_ops, reference_ops=ref_ops)
        repeat = out.of_kind("repeat")
        try:
            rep = decode(repeat[0]) if repeat else None
        except protocol.ProtocolError as e:
            f.flag("protocol_violation", str(e))
            rep = None
        check_consistency(f, references, rep, main, atol=atol, rtol=rtol)
        check_probes(f, out.probes)
        if out.protocol_error:
            f.flag("protocol_violation", out.protocol_error)

        runtime = spread = None
        metrics: dict = {"worker_wall_s": out.wall_s, "output_dtype": str(dtype),
                         "full_size_trials": len(main), "trials_run": len(plan),
                         "transfer_bytes": dict(out.transfer), "memory_cap_mb": out.memory_cap_mb,
                         "worker_peak_rss_mb": round(out.peak_rss_mb, 1)}
        if self.transfer_note:
            metrics["transfer_note"] = self.transfer_note
        timing_msgs = out.of_kind("timing")
        ok_so_far = f.stage == Stage.CORRECT and not f.flags
        if ok_so_far:
            if not timing_msgs:
                f.lower(Stage.RUNTIME, "the worker ended before its timed runs finished: " + out.exit_text())
            else:
                runtime, spread = self._check_timing(f, out, timing_msgs[0], references, job, metrics,
                                                     atol=atol, rtol=rtol, task=task)
        result_kw: dict = {"max_abs_err": f.max_abs_err, "max_rel_err": f.max_rel_err,
                           "compile_s": compile_s}
        if f.stage == Stage.CORRECT and not f.flags and runtime:
            b = self._baseline(task)
            speedup = b.eager_ms / runtime if b.eager_ms else None
            if speedup and speedup > cfg.speedup_recheck_threshold:
                runtime, spread = self._recheck(task, cand, backend, f, runtime, spread, metrics)
                speedup = b.eager_ms / runtime if runtime else None
            if f.stage == Stage.CORRECT and not f.flags:
                result_kw.update(eager_ms=b.eager_ms, compile_ms=b.compile_ms, speedup_eager=speedup,
                                 speedup_compile=(b.compile_ms / runtime) if b.compile_ms and runtime else None)
        result_kw.update(runtime_ms=runtime, runtime_spread=spread, metrics=metrics)
        return self._result(task, cand, t0, f.stage, flags=f.flags, error="\n".join(f.errors), **result_kw)

    def _check_timing(self, f: Findings, out: JobOutcome, msg, references, job, metrics, *, atol, rtol,
                      task: Task):
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
        sets = job["timing"]["sets"]
        if not isinstance(last, list) or len(last) != len(sets):
            f.flag("timed_output_mismatch", "the timed runs' outputs are missing")
        else:
            changes = msg.header.get("last_input_changes")
            if not (isinstance(changes, list) and len(changes) == len(sets)
                    and all(type(n) is int and n >= 0 for n in changes)):
                changes = [0] * len(sets)
            model = None
            for k, i in enumerate(sets):
                ref = references[i]
                if changes[k]:  # computed on inputs scaled to 1/2 (odd changes) or 1/4 (even)
                    p = job["trials"][i]
                    model = model or self._reference.model(task, job["variants"][p["variant"]], job["init_seed"])
                    ref = self._reference.outputs(model, task, job["variants"][p["variant"]],
                                                  InputSpec(p["seed"], p["distribution"]),
                                                  scale=0.5 if changes[k] % 2 else 0.25)
                c = compare(ref, last[k], atol=atol, rtol=rtol)
                if not c.ok:
                    f.flag("timed_output_mismatch", f"output of a timed run on trial {i}'s inputs: {c.message}")
                    break
        return verdict.runtime_ms, verdict.spread

    def _recheck(self, task, cand, backend, f: Findings, runtime, spread, metrics):
        """A suspiciously large speedup: judge again in a fresh worker on new inputs and keep
        the slower time."""
        cfg = self.config
        metrics["speedup_rechecked"] = True
        base = secrets.randbits(48)
        ref_ops = self._reference_ops(task)
        plan = self._plan(task, base)
        init_seed = (base * 31 + 17) % (2**62)
        job = self._job(task, cand, plan, init_seed, timing=True, backend=backend)
        out = self._run(job, deadline_s=cfg.timeout_s, stop_early=False, reference_ops=ref_ops, task=task)
        timing_msgs = out.of_kind("timing")
        trials = {m.header.get("index"): m for m in out.of_kind("trial")}
        if not timing_msgs or len(trials) < len(plan):
            f.flag("recheck_failed", "the re-measurement of a large speedup did not complete: " + out.exit_text())
            return runtime, spread
        refs = {}
        models: dict[int, Any] = {}
        for i, p in enumerate(plan):
            if p["variant"] not in models:
                models[p["variant"]] = self._reference.model(task, job["variants"][p["variant"]], init_seed)
            refs[i] = self._reference.outputs(models[p["variant"]], task, job["variants"][p["variant"]],
                                              InputSpec(p["seed"], p["distribution"]))
        g = Findings()
        check_trials(g, trials, refs, plan, atol=task.atol, rtol=task.rtol, launch_key=backend.launch_key,
                     allow_torch_ops=cfg.allow_torch_ops, reference_ops=ref_ops)
        check_probes(g, out.probes)
        r2, s2 = self._check_timing(g, out, timing_msgs[0], refs, job, metrics, atol=task.atol, rtol=task.rtol, task=task)
        if g.stage != Stage.CORRECT or g.flags:
            f.flag("recheck_failed", "the re-measurement failed: " + "; ".join(g.errors)[:500])
            return runtime, spread
        metrics["recheck_runtime_ms"] = r2
        if r2 and r2 > runtime:
            return r2, s2
        return runtime, spread

    def _reference_ops(self, task: Task) -> frozenset:
        """The PyTorch compute ops the task's reference runs (cached per task), recorded on
        inputs from a seed no trial uses, so no trial's reference output exists yet."""
        key = task.source_hash
        if key not in self._ref_ops:
            try:
                from foundry.evaluate.harness import _OpRecorder
                model = self._reference.model(task, {}, 12345)
                rec = _OpRecorder()
                sizes: dict = {}
                with rec:
                    out = self._reference.outputs(model, task, {}, InputSpec(987654321), sizes=sizes)
                self._sizes[key] = (int(sizes.get("input_bytes", 0)), tensor_bytes(out))
                del out
                self._ref_ops[key] = frozenset(rec.compute)
            except Exception:  # noqa: BLE001 - a failing task is reported by the worker
                self._ref_ops[key] = frozenset()
        return self._ref_ops[key]

    def _check_degenerate(self, task: Task, outputs: list) -> Degeneracy:
        key = task.source_hash
        if key not in self._degeneracy:
            small = small_sizes(task) if self._large(task) else None
            try:  # a property of the function: a large task is checked at its SMALL_SIZES
                d = external_check(task, device=self.config.device, overrides=small)
                if d is not None and d.degenerate and self.config.device != "cpu" \
                        and d.reason.startswith("reference failed"):  # maybe only under the device default
                    d = external_check(task, device="cpu", overrides=small)
            except Exception:  # noqa: BLE001 - fall back to the judge's own check
                d = None
            self._degeneracy[key] = d if d is not None else minimal_check(outputs)
        return self._degeneracy[key]

    def _baseline(self, task: Task) -> Baseline:
        cfg = self.config
        key = baseline_key(task, device=cfg.device, hardware=self.hardware, threads=cfg.threads)
        cached = self._baselines.get(key)
        if cached and cached.eager_ms and (cached.compile_ms or cached.error or not cfg.compile_baseline):
            return cached
        plan = [{"seed": s.seed, "distribution": "standard", "variant": 0}
                for s in trial_plan(TIMING_SETS, BASELINE_SEED)]
        job = self._job(task, None, plan, BASELINE_SEED, timing=True)
        job["variants"] = [{}]
        self._reference_ops(task)
        out = self._run(job, deadline_s=cfg.baseline_timeout_s, stop_early=False, task=task)
        eager = compiled = compile_s = None
        start = end = None
        for m in out.messages:
            kind = m.header.get("kind")
            if kind == "timing_start":
                start, end = m.at, None
            elif kind == "timing_end":
                end = m.at
            elif kind == "baseline":
                v = analyze(m.header, started_at=start, ended_at=end or m.at)
                if m.header.get("which") == "eager":
                    eager = v.runtime_ms
                else:
                    compiled = v.runtime_ms
                    compile_s = m.header.get("compile_s")
        errors = out.of_kind("error")
        err = str(errors[0].header.get("error", "")) if errors else ("" if eager else out.exit_text())
        b = Baseline(eager_ms=eager, compile_ms=compiled, compile_s=compile_s, error=self._clean(err))
        if eager:
            self._baselines.put(key, b)
        return b
