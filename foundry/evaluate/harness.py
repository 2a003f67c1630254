"""The sandbox worker's side of an evaluation (runs in a forked child, never in the judge).

The judge sends one job (JSON, on a pipe only it writes to); the worker builds the task's
inputs from the job's seeds BEFORE any candidate code runs, then loads the candidate,
runs the trials and the timing protocol, and streams raw outputs back as messages
(foundry.evaluate.protocol). The worker never sees a reference output and never
decides a verdict: everything it reports is data the judge checks against its own
reference, clock and /proc view of this process. Once the candidate's code has run,
nothing in this process is trusted.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import os
import sys
import threading
import time
import traceback
import types

_CLOCK = time.perf_counter_ns  # captured when the warm worker starts, before any candidate

import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from foundry import kernels  # noqa: E402
from foundry.evaluate import compile_guard, cpu_timing, output_tree, protocol  # noqa: E402,F401 - loaded before any candidate
from foundry.evaluate.device import get_device  # noqa: E402
from foundry.evaluate.job import Job, TimingSpec  # noqa: E402
from foundry.evaluate.movement_ops import MOVEMENT_OPS  # noqa: E402
from foundry.evaluate.screen_run import run_screen  # noqa: E402
from foundry.evaluate.trial_inputs import make_trial_inputs, trial_input_spec  # noqa: E402
from foundry.tasks.inputs import (InputSpec, build_device, clone_inputs, make_init_inputs,  # noqa: E402,F401
                                  seed_everything)
from foundry.tasks.loader import build_module  # noqa: E402
from foundry.types import Task  # noqa: E402


class OpRecorder(TorchDispatchMode):
    """Records the aten ops that compute (anything beyond allocation, views and copies)."""

    def __init__(self) -> None:
        super().__init__()
        self.compute: dict[str, int] = {}

    def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name not in MOVEMENT_OPS:
            self.compute[name] = self.compute.get(name, 0) + 1
        return func(*args, **(kwargs or {}))


def _digest(inputs) -> list[str]:
    """Host inputs: a hash of their bytes (read in place, no copy)."""
    out = []
    for x in inputs:
        if isinstance(x, torch.Tensor):
            t = x.detach().cpu().contiguous().reshape(-1)
            out.append(hashlib.blake2b(memoryview(t.view(torch.uint8).numpy()) if t.numel() else b"",
                                       digest_size=16).hexdigest())
        else:
            out.append(repr(x)[:200])
    return out


def _same(a, b) -> bool:
    """Bitwise the same value (NaN equals NaN)."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
            return False
        if bool(torch.equal(a, b)):
            return True
        if a.is_floating_point() or a.is_complex():
            return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
        return False
    return repr(a)[:200] == repr(b)[:200]


class Worker:
    def __init__(self, job_fd: int, result_fd: int, job: Job, shm_fd: int = -1):
        self.job_fd, self.result_fd, self.job = job_fd, result_fd, job
        self.clock = _CLOCK
        self.device = get_device(job.device)
        self.channel = protocol.Channel(result_fd, ack_fd=job_fd, shm_fd=shm_fd,
                                        cuda_ipc=job.cuda_ipc and job.device == "cuda")
        self._profiled = False
        self._candidate_written = False
        self._setup_done = False  # the backend's worker setup ran (once per job)
        self.poison_s = 0.0  # spent making never-written memory read as poison

    def send(self, header: dict, tensors=()) -> None:
        self.channel.send(header, tensors)

    def wait_go(self) -> bool:
        """Tell the judge the worker is idle, and block until it has probed us; False when
        the judge says stop."""
        self.send({"kind": "idle"})
        return os.read(self.job_fd, 1) == b"g"

    # ------------------------------------------------------------------ setup
    def build_inputs(self) -> None:
        job = self.job
        t = job.task
        task = Task(task_id=t.task_id, path=t.path, source=t.source, size_overrides=t.overrides)
        self.variants = []
        for overrides in job.variants:
            module = build_module(task, overrides)
            init = make_init_inputs(module, job.init_seed)
            self.variants.append({"module": module, "init": init})
        self.trials = []
        for tr in job.trials:
            spec = trial_input_spec(tr)  # a paired trial's redrawn input included
            inputs = [self.device.to_device(x) for x in
                      make_trial_inputs(self.variants[tr.variant]["module"], spec, self.device.name)]
            # host inputs: a digest; device inputs are regenerated from the seed to compare
            self.trials.append({"variant": tr.variant, "spec": spec, "inputs": inputs,
                                "digest": _digest(inputs) if self.device.name == "cpu" else None})

    def fresh_inputs(self, index: int) -> list:
        tr = self.trials[index]
        return [self.device.to_device(x) for x in
                make_trial_inputs(self.variants[tr["variant"]]["module"], tr["spec"], self.device.name)]

    def inputs_changed(self, index: int) -> list[int]:
        """Which inputs of trial `index` differ from what its seed generates."""
        tr = self.trials[index]
        if tr["digest"] is not None:
            return [k for k, (a, b) in enumerate(zip(tr["digest"], _digest(tr["inputs"]))) if a != b]
        fresh = self.fresh_inputs(index)
        return [k for k, (a, b) in enumerate(zip(fresh, tr["inputs"])) if not _same(a, b)]

    def load_candidate(self, params: dict | None = None) -> types.ModuleType:
        """Execute the candidate's source as a fresh module; PARAMS are the TUNABLE
        defaults updated with the job's params (or `params`, for a screened point)."""
        cand = self.job.candidate
        self.ensure_worker_setup()
        path = self.write_candidate_file()
        module = types.ModuleType("foundry_candidate")
        module.__file__ = path
        sys.modules["foundry_candidate"] = module
        exec(compile(cand.source, path, "exec"), module.__dict__)
        defaults = {}
        tunable = module.__dict__.get("TUNABLE")
        if isinstance(tunable, dict):
            defaults = {k: (v[0] if isinstance(v, (list, tuple)) and v else v) for k, v in tunable.items()}
        merged = {**defaults, **(cand.params if params is None else params)}
        module.PARAMS = merged
        if not isinstance(module.__dict__.get("ModelNew"), type):
            raise TypeError("the candidate defines no class ModelNew")
        return module

    def ensure_worker_setup(self) -> None:
        """The backend's worker setup (e.g. its launch hook), once per job."""
        cand = self.job.candidate
        if cand.worker_setup and not self._setup_done:
            mod_name, fn = cand.worker_setup.split(":")
            getattr(importlib.import_module(mod_name), fn)()
            self._setup_done = True

    def write_candidate_file(self) -> str:
        """The candidate's source as a file (Triton reads a kernel's source back from it),
        written once per job (a screen loads it once per point)."""
        path = os.path.join(os.getcwd(), "candidate.py")
        if not self._candidate_written:
            with open(path, "w") as f:
                f.write(self.job.candidate.source)
            self._candidate_written = True
        return path

    def construct(self, cls) -> list:
        models = []
        for v in self.variants:
            seed_everything(self.job.init_seed)
            with build_device(self.device.name):  # as the judge builds its reference
                model = cls(*v["init"])
            if hasattr(model, "eval"):
                model.eval()
            models.append(self.device.to_device(model))
        return models

    # ------------------------------------------------------------------ runs
    def run_trial(self, model, inputs, *, record: bool) -> tuple:
        cand = self.job.candidate
        kernels.reset_launches()
        before = threading.active_count()
        t0 = self.clock()
        self.device.poison(True)
        self.poison_s += (self.clock() - t0) / 1e9
        rec = OpRecorder() if record else None
        try:
            profiled = None
            with torch.no_grad():
                if (rec is not None and hasattr(self.device, "profiled_call") and not self._profiled
                        and not cand.launch_key):
                    self._profiled = True
                    with rec:  # no launch records: the device's profiler says which kernels ran
                        out, profiled = self.device.profiled_call(
                            lambda: model(*inputs), source=cand.source, backend=cand.backend)
                elif rec is not None:
                    with rec:
                        out = model(*inputs)
                else:
                    out = model(*inputs)
            self.device.synchronize()
        finally:
            self.device.poison(False)
        key = cand.launch_key
        launches = sum(n for (b, _), n in kernels.launches().items() if b == key) if key else -1
        extra_threads = threading.active_count() - before
        info = {"launches": launches, "torch_ops": rec.compute if rec else {},
                "threads_started": extra_threads}
        if profiled is not None:
            info["profiled"] = profiled
        return out, info

    def run_candidate(self) -> None:
        job = self.job
        t0 = self.clock()
        try:
            module = self.load_candidate()
            models = self.construct(module.ModelNew)
        except BaseException:  # noqa: BLE001 - report any failure, even SystemExit
            self.send({"kind": "error", "stage": "compile", "error": traceback.format_exc()})
            return
        self.send({"kind": "compiled", "compile_s": (self.clock() - t0) / 1e9})
        record = job.candidate.record_ops
        parts = {"run_s": 0.0, "input_check_s": 0.0, "send_s": 0.0}  # where the trials' time went
        for i, tr in enumerate(self.trials):
            t0 = self.clock()
            try:
                out, info = self.run_trial(models[tr["variant"]], tr["inputs"], record=record)
            except BaseException:  # noqa: BLE001
                self.send(failure("runtime", trial=i))
                return
            t1 = self.clock()
            tensors: list = []
            tree = output_tree.encode_tree(out, tensors)
            changed = self.inputs_changed(i)
            tr["inputs"] = None  # checked: later runs regenerate inputs from the seed (at full size, GBs)
            t2 = self.clock()
            self.send({"kind": "trial", "index": i, "tree": tree, "inputs_changed": changed, **info}, tensors)
            del out, tensors
            parts["run_s"] += (t1 - t0) / 1e9
            parts["input_check_s"] += (t2 - t1) / 1e9
            parts["send_s"] += (self.clock() - t2) / 1e9
        parts["poison_s"] = self.poison_s  # part of run_s
        try:  # the same input twice must give the same answer
            out, info = self.run_trial(models[self.trials[0]["variant"]], self.fresh_inputs(0), record=False)
        except BaseException:  # noqa: BLE001
            self.send(failure("runtime", trial=0))
            return
        tensors = []
        self.send({"kind": "repeat", "index": 0, "tree": output_tree.encode_tree(out, tensors), "trial_parts": parts},
                  tensors)
        del out, tensors  # sent: the timed runs' sets need the room (GBs at full size)
        go = self.wait_go()
        if job.timing is not None and go:
            self.time_model(models[0], job.timing, kind="timing")
            self.wait_go()

    def time_model(self, model, timing: TimingSpec, *, kind: str, extra: dict | None = None,
                   fatal: bool = True, sets: list | None = None, changes: list | None = None) -> None:
        """Time `model` on `timing`'s input sets (fresh ones, unless `sets` are given: a
        screen's points share one set, changed in place from point to point, with one
        count of `changes` [n] for them all, so the inputs stay within 4x of the
        original however many points are timed)."""
        if sets is None:
            sets = [self.fresh_inputs(i) for i in timing.sets]

        def call(inputs):
            with torch.no_grad():
                return model(*inputs)

        changes = [0] if changes is None else changes

        def change_inputs():  # exact, never back to the original: x/2, x/4, x/2, x/4, ...
            factor = 0.5 if changes[0] == 0 or changes[0] % 2 == 1 else 2.0
            changes[0] += 1
            for inputs in sets:
                for k, x in enumerate(inputs):
                    if isinstance(x, torch.Tensor) and x.is_floating_point():
                        if x.is_contiguous():
                            x.mul_(factor)  # in place: a cache keyed on the buffer goes stale
                        else:
                            inputs[k] = x * factor

        extra_kw = {}
        if "on_block" in inspect.signature(self.device.time_forward).parameters:
            extra_kw["on_block"] = change_inputs
        try:
            res = self.device.time_forward(call, sets, clock=self.clock, params=timing.params,
                                           on_start=lambda: self.send({"kind": "timing_start", **(extra or {})}),
                                           **extra_kw)
            self.send({"kind": "timing_end", **(extra or {})})  # before the outputs are packed
        except BaseException:  # noqa: BLE001
            if fatal:  # with out_of_memory: the judge tries such an evaluation again, the device reserved whole
                self.send(failure("runtime", phase="timing", **(extra or {})))
                raise SystemExit(0)
            self.send({"kind": "screen_error", "stage": "runtime", **(extra or {}), "error": traceback.format_exc()})
            return
        tensors: list = []
        last = list(res.pop("last_outputs"))
        if kind != "timing":  # the judge checks only candidates' timed outputs
            last = [None] * len(last)
        tree = output_tree.encode_tree(last, tensors)
        self.send({"kind": kind, "tree": tree, **res, **(extra or {})}, tensors)

    def run_baseline(self) -> None:
        """Eager, then torch.compile: each timed with the device to itself (the go of an
        idle). The compile's first call runs inside its timed section too: Inductor
        benchmarks its candidate configurations there, and beside other lanes' work those
        benchmarks are not the user's quiet device (on an H200, two pointwise tasks'
        torch.compile baselines came out 13-15% slower in one run than in another with
        it outside). On a GPU both are then profiled once, after every timed run (a
        profiler session leaves the process's later launches slower), and their kernels
        sent in one "baseline_kernels" message."""
        for trial in self.trials:  # timed on fresh sets made from the same seeds: these go first (GBs at full size)
            trial["inputs"] = None
        module = self.variants[0]["module"]
        seed_everything(self.job.init_seed)
        with build_device(self.device.name):
            model = self.device.to_device(module.Model(*self.variants[0]["init"]))
        model.eval()
        timing = self.job.timing
        if not self.wait_go():
            return
        self.time_model(model, timing, kind="baseline", extra={"which": "eager"})
        self.wait_go()
        forwards = {"eager": model}
        if self.job.compile_baseline:
            first_inputs = self.fresh_inputs(timing.sets[0])
            if not self.wait_go():
                return
            t0 = self.clock()
            mode = self.job.compile_mode
            compiled = torch.compile(model, mode=None if mode == "default" else mode)
            with torch.no_grad():
                compiled(*first_inputs)
            compile_s = (self.clock() - t0) / 1e9
            del first_inputs
            self.time_model(compiled, timing, kind="baseline", extra={"which": "compile", "compile_s": compile_s})
            self.wait_go()
            forwards["compile"] = compiled
        kernels = {which: self.profile_baseline(fn) for which, fn in forwards.items()}
        if any(v is not None for v in kernels.values()):
            self.send({"kind": "baseline_kernels", **{k: v for k, v in kernels.items() if v is not None}})

    def profile_baseline(self, model) -> dict | None:
        """What one forward of `model` launched, where the device can say (a GPU), else
        None; a failed profile is a note ({"error": ...}), never the baseline's failure."""
        summary = getattr(self.device, "kernel_summary", None)
        if summary is None:
            return None
        inputs = self.fresh_inputs(self.job.timing.sets[0])
        try:
            with torch.no_grad():
                return summary(lambda: model(*inputs))
        except Exception as e:  # noqa: BLE001 - a report
            return {"error": f"{type(e).__name__}: {e}"[:200]}


RUNS = {"candidate": Worker.run_candidate, "baseline": Worker.run_baseline, "screen": run_screen}


def failure(stage: str, **extra) -> dict:
    """The error message for the exception being handled: its traceback, and whether the
    device ran out of memory (the judge then tries the evaluation again once, with the
    lanes' device memory reserved for it whole: another lane's work may have taken it)."""
    oom = getattr(torch, "OutOfMemoryError", None)
    return {"kind": "error", "stage": stage, **extra, "error": traceback.format_exc(),
            "out_of_memory": oom is not None and isinstance(sys.exc_info()[1], oom)}


def main(job_fd: int, result_fd: int, shm_fd: int = -1) -> None:
    """Entry point in a forked worker; never returns."""
    code = 0
    try:
        job = protocol.read_job(job_fd)
        worker = Worker(job_fd, result_fd, job, shm_fd)
        t0 = worker.clock()
        worker.device.prepare_worker(job.threads)
        t1 = worker.clock()
        try:
            worker.build_inputs()
        except BaseException:  # noqa: BLE001 - the task itself failed: the judge says so
            worker.send(failure("task"))
            raise SystemExit(0)
        # measured before any candidate code runs: the judge may trust these two
        worker.send({"kind": "ready", "device_setup_s": (t1 - t0) / 1e9, "inputs_s": (worker.clock() - t1) / 1e9})
        if job.kind != "baseline":  # candidate code runs from here on; a baseline job compiles itself
            compile_guard.install(report=lambda why: worker.send({"kind": "error", "stage": "runtime",
                                                                  "flag": "runtime_compile", "error": why}))
        RUNS[job.kind](worker)
        worker.send({"kind": "done"})
    except SystemExit:
        pass
    except BaseException:  # noqa: BLE001
        code = 3
        try:
            protocol.send(result_fd, failure("runtime"))
        except OSError:
            pass
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:  # noqa: BLE001
            pass
        os._exit(code)
