"""Measurement side of `quality.py`: timing protocol and the worker processes.

`time_forward` times a forward (GPU: CUDA events, device synchronize, L2 flush before
each trial; CPU: monotonic clock), `worker_main` serves measurement jobs in a spawned
process of its own process group, and `Worker` runs jobs there with a deadline per phase,
killing and replacing the process on a timeout or crash. `DeviceLock` keeps measurements
of several workers from overlapping.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import re
import signal
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from foundry.evaluate.compare import compare
from foundry.tasks.loader import build_module
from foundry.tasks.roofline import measure_ceilings
from foundry.types import Task


class DeviceLock:
    """One measurement at a time across worker processes. Records its holder's pid so
    the parent can free it when it kills a worker that held it."""

    def __init__(self, ctx):
        self.lock = ctx.Lock()
        self.holder = ctx.Value("i", 0)

    def __enter__(self):
        self.lock.acquire()
        self.holder.value = os.getpid()

    def __exit__(self, *exc):
        self.holder.value = 0
        self.lock.release()

    def free_if_held_by(self, pid: int) -> None:
        if pid and self.holder.value == pid:
            self.holder.value = 0
            self.lock.release()

def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def _flush_buffer(dev: torch.device, flush_mb: int | None) -> torch.Tensor:
    if flush_mb is None:
        l2 = getattr(torch.cuda.get_device_properties(dev), "L2_cache_size", 0) if dev.type == "cuda" else 0
        nbytes = max(2 * l2, (256 if dev.type == "cuda" else 32) << 20)
    else:
        nbytes = flush_mb << 20
    return torch.empty(nbytes // 4, dtype=torch.float32, device=dev)


def time_forward(fn, *, dev: torch.device, flush: torch.Tensor, trials: int, warmup: int,
                 max_seconds: float) -> dict:
    """Median and spread ((p90 - p10) / median) of `fn()` in ms over up to `trials`
    trials (at least 3, fewer when they would take longer than `max_seconds`)."""
    for _ in range(warmup):
        fn()
    _sync(dev)
    times: list[float] = []
    start_all = time.perf_counter()
    for i in range(trials):
        flush.zero_()
        _sync(dev)
        if dev.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize(dev)
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
        if i >= 2 and time.perf_counter() - start_all > max_seconds:
            break
    times.sort()
    med = statistics.median(times)
    p10, p90 = times[int(0.1 * (len(times) - 1))], times[int(math.ceil(0.9 * (len(times) - 1)))]
    return {"ms": med, "spread": (p90 - p10) / med if med > 0 else 0.0, "trials": len(times)}


def _compare(ref: Any, got: Any, atol: float | None, rtol: float | None) -> tuple[bool, float]:
    """The judge's comparison (`foundry.evaluate.compare`) at `atol`/`rtol` (None: the
    dtype's default): whether `got` passes, and its largest absolute error (inf where the
    structure, a shape or a dtype differs)."""
    verdict = compare(ref, got, atol=atol, rtol=rtol)
    return verdict.ok, float("inf") if verdict.kind == "shape" else verdict.max_abs_err


def _load_candidate(path: str):
    import types
    name = "quality_best_" + re.sub(r"\W", "_", Path(path).stem)
    module = types.ModuleType(name)
    module.__file__ = path
    sys.modules[name] = module
    exec(compile(Path(path).read_text(), path, "exec"), module.__dict__)
    if "PARAMS" not in module.__dict__:
        tunable = module.__dict__.get("TUNABLE", {}) or {}
        module.PARAMS = {k: v[0] for k, v in tunable.items()}
    return module


def err_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300] if str(e).strip() else ''}"


def _run_task(job: dict, send, lock) -> None:
    task: Task = job["task"]
    dev = torch.device(job["device"])
    settings = dict(trials=job["trials"], warmup=job["warmup"], max_seconds=job["max_seconds"])

    def timed(fn) -> dict:
        with lock:  # one measurement at a time on the device, whatever the worker count
            return time_forward(fn, dev=dev, flush=flush, **settings)
    send(("phase", "eager", None))
    module = build_module(task)
    # Weights and inputs are made on the device (fast at full sizes); modules keep their
    # default (training) mode, as KernelBench times them.
    with torch.device(dev):
        torch.manual_seed(0)
        model = module.Model(*module.get_init_inputs()).to(dev)
        torch.manual_seed(1)
        inputs = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]
    flush = _flush_buffer(dev, job["flush_mb"])
    with torch.no_grad():
        with lock:
            ref = model(*inputs)
            _sync(dev)
        send(("result", "eager", timed(lambda: model(*inputs))))
        if job["compile"]:
            send(("phase", "compile", None))
            try:
                compiled = torch.compile(model, backend=job["compile_backend"], mode=job["compile_mode"])
                t0 = time.perf_counter()
                out = compiled(*inputs)
                _sync(dev)
                compile_s = time.perf_counter() - t0
                ok, err = _compare(ref, out, 1e-2, 1e-2)  # a loose agreement check, not the judge's rule
                res = timed(lambda: compiled(*inputs))
                send(("result", "compile", {**res, "compile_s": compile_s, "max_abs_err": err, "agrees": ok}))
            except Exception as e:  # noqa: BLE001 - a compile failure is a result
                send(("result", "compile", {"error": err_text(e)}))
        if job["best_path"]:
            send(("phase", "best", None))
            try:
                cand = _load_candidate(job["best_path"])
                with torch.device(dev):  # the same seed and device as the reference: same weights
                    torch.manual_seed(0)
                    new = cand.ModelNew(*module.get_init_inputs()).to(dev)
                with lock:
                    out = new(*inputs)
                    _sync(dev)
                ok, err = _compare(ref, out, task.atol, task.rtol)  # the judge's rule
                res = timed(lambda: new(*inputs))
                send(("result", "best", {**res, "correct": ok, "max_abs_err": err}))
            except Exception as e:  # noqa: BLE001 - a broken best file is a result
                send(("result", "best", {"error": err_text(e)}))


def worker_main(conn, threads: int | None, lock) -> None:
    """Serve jobs from `conn` until None arrives. Own process group, so the parent can
    kill it together with any compiler processes it started."""
    os.setsid()
    if threads:
        torch.set_num_threads(threads)
    while True:
        job = conn.recv()
        if job is None:
            return
        try:
            if job["kind"] == "ceilings":
                c = measure_ceilings(job["device"])
                conn.send(("result", "ceilings", {"bandwidth_bytes_per_s": c.bandwidth_bytes_per_s,
                                                  "flops_per_s": c.flops_per_s,
                                                  "half_flops_per_s": c.half_flops_per_s, "source": c.source}))
            else:
                _run_task(job, conn.send, lock)
        except Exception as e:  # noqa: BLE001 - reported to the parent, worker lives on
            conn.send(("error", None, err_text(e)))
        finally:
            if job.get("kind") == "task":
                import gc
                torch._dynamo.reset()
                gc.collect()
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()
        conn.send(("done", None, None))


def _broken_device(out: dict) -> bool:
    texts = [out.get("error") or ""] + [str((r or {}).get("error", "")) for r in out["results"].values()]
    return any(m in t for t in texts for m in ("CUDA error", "illegal memory access", "device-side assert"))


class Worker:
    """A spawned worker process with per-phase deadlines; replaced after a timeout or crash."""

    def __init__(self, threads: int | None, lock):
        self.threads = threads
        self.lock = lock
        self.proc = None
        self.conn = None

    def start(self) -> None:
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=worker_main, args=(child, self.threads, self.lock), daemon=False)
        self.proc.start()
        child.close()

    def kill(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
        if self.proc is not None:
            self.proc.join(10)
            self.lock.free_if_held_by(self.proc.pid)
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            try:
                self.conn.send(None)
                self.proc.join(10)
            except (BrokenPipeError, OSError):
                pass
        self.kill()

    def run(self, job: dict, deadlines: dict[str, float]) -> dict:
        """Send `job`; collect its results until done, a deadline of the current phase
        passes, or the worker dies. Returns {"results": {...}, "error": str | None}."""
        if self.proc is None or not self.proc.is_alive():
            self.start()
        out: dict = {"results": {}, "error": None}
        self.conn.send(job)
        phase = "start"
        deadline = time.monotonic() + deadlines.get(phase, deadlines["default"])
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not self.conn.poll(min(left, 1.0)):
                if left <= 0:
                    out["error"] = f"timeout in phase {phase} after {deadlines.get(phase, deadlines['default']):.0f} s"
                    out["results"].setdefault(phase, {"error": out["error"]})
                    self.kill()
                    return out
                if not self.proc.is_alive():
                    out["error"] = f"worker died in phase {phase} (exit code {self.proc.exitcode})"
                    out["results"].setdefault(phase, {"error": out["error"]})
                    self.kill()
                    return out
                continue
            try:
                kind, key, payload = self.conn.recv()
            except (EOFError, OSError):
                continue  # the liveness check above reports it
            if kind == "phase":
                phase = key
                deadline = time.monotonic() + deadlines.get(phase, deadlines["default"])
            elif kind == "result":
                out["results"][key] = payload
            elif kind == "error":
                out["error"] = payload
                out["results"].setdefault(phase, {"error": payload})
            elif kind == "done":
                if _broken_device(out):
                    self.kill()  # a CUDA fault poisons the process: the next task gets a fresh one
                return out
