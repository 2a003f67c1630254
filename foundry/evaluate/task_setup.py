"""What the judge learns once per task, before its first job: whether an evaluation
fits in memory, its data sizes, the PyTorch ops its reference computes, and whether the
task is degenerate (with its differential inputs, which the job's trials depend on).
Baselines are cached in `baselines.py`."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from foundry.evaluate.config import EvalConfig
from foundry.evaluate.device_gate import DeviceGate
from foundry.evaluate.degeneracy import Degeneracy, judge_degeneracy, known_degeneracy, minimal_check
from foundry.evaluate.device_memory import OOM_RETRY_WAIT_S, out_of_memory, release
from foundry.evaluate.job_plan import TIMING_SETS, is_large
from foundry.evaluate.phases import PhaseTimes
from foundry.evaluate.reference import ReferenceRunner
from foundry.evaluate.task_size import (TaskSize, TaskTooLarge, available_bytes, check_fits, meta_size, model_bytes,
                                        timing_sets_that_fit)
from foundry.evaluate.trial_inputs import tensor_bytes
from foundry.tasks.degeneracy import MIN_TRIALS
from foundry.tasks.inputs import InputSpec
from foundry.types import Task

SIZING_SEED, SIZING_INPUT_SEED = 12345, 987654321  # seeds no trial uses


class TaskSetup:
    """Per task (by source hash): sizes, reference ops, the too-large verdict, degeneracy."""

    def __init__(self, *, config: EvalConfig, reference: ReferenceRunner, gate: DeviceGate | None = None):
        self.config = config
        self.reference = reference
        self.gate = gate if gate is not None else DeviceGate()  # its device work is shared work
        self._size: dict[str, tuple[TaskSize, int]] = {}  # task -> (its sizes, full-size trials)
        self.sizes: dict[str, tuple[int, int]] = {}  # task -> (input bytes, output bytes) per trial
        self.param_bytes: dict[str, int] = {}  # task -> its model's parameters and buffers, bytes
        self._ops: dict[str, frozenset] = {}
        self._too_large: dict[str, str] = {}  # task -> why it cannot be judged here
        self._degeneracy: dict[tuple, Degeneracy | None] = {}  # the check's verdict; None: it could not run
        self._fallback: dict[tuple, Degeneracy] = {}  # minimal_check's, where the check could not run
        self._paired: dict[str, int] = {}  # task -> paired trials its jobs have (differential inputs)
        self.parts: dict[str, dict[str, float]] = {}  # task -> its setup's split (meta sizing, reference ops)

    def size_of(self, task: Task) -> tuple[int, int]:
        return self.sizes.get(task.source_hash, (0, 0))

    def reference_ops(self, task: Task, phases: PhaseTimes | None = None) -> frozenset:
        """The PyTorch compute ops the task's reference runs (and its data sizes, recorded
        on the way), measured once on inputs from a seed no trial uses, so no trial's
        reference output exists yet. Raises TaskTooLarge for a task that cannot fit."""
        key = task.source_hash
        if key in self._too_large:
            raise TaskTooLarge(self._too_large[key])
        if key not in self._ops:
            phases = phases or PhaseTimes()
            if self.config.device != "cuda":
                with phases.measure("task_setup"), self.gate.shared():
                    self._ops[key] = self._setup_sized_first(task)
            else:
                try:
                    self._ops[key] = self._device_setup(task, phases, crowded_ok=True)
                except _Crowded:
                    pass
            if key not in self._ops:
                # its forward ran out of device memory beside other lanes' evaluations,
                # though one evaluation fits: once the reservations held now have ended,
                # again with the lanes' device memory reserved whole (outside the shared
                # section: the lanes holding memory need their timed sections to finish;
                # outside the except clause, whose exception kept the first forward's frames
                # and the tensors they held alive)
                with phases.measure("device_memory_wait"):
                    self.gate.wait_for_reservations(timeout_s=OOM_RETRY_WAIT_S)
                with self.gate.memory(self.gate.capacity_bytes):
                    self._ops[key] = self._device_setup(task, phases, crowded_ok=False)
        return self._ops[key]

    def _device_setup(self, task: Task, phases: PhaseTimes, *, crowded_ok: bool) -> frozenset:
        with phases.measure("task_setup"), self.gate.shared():
            try:
                return self._setup_on_device(task, crowded_ok=crowded_ok)
            finally:  # its full-size forward's blocks: not left cached here
                self._release()

    def _setup_sized_first(self, task: Task) -> frozenset:
        """Host memory: size the task on the meta device before anything is allocated (a
        host allocation too large is not an exception but the end of the process)."""
        t0 = time.monotonic()
        self._check_fits(task, meta_size(task))
        t1 = time.monotonic()
        ops = self._record_ops(task)
        self.parts[task.source_hash] = {"fit_check_s": round(t1 - t0, 4),
                                        "reference_ops_s": round(time.monotonic() - t1, 4)}
        return ops

    def _setup_on_device(self, task: Task, *, crowded_ok: bool = False) -> frozenset:
        """GPU memory: record the ops on the device first (its sizes come with it; an
        allocation too large is an exception there), then check that a whole evaluation
        fits. Only a failed forward pays for sizing on the meta device, whose first use
        imports much of torch. A forward out of device memory where one evaluation fits
        raises _Crowded when `crowded_ok` (other lanes' work may hold the memory), else
        makes the task too large."""
        key = task.source_hash
        t0 = time.monotonic()
        try:
            ops = self._record_ops(task, quiet=False)
        except Exception as e:  # noqa: BLE001 - e.g. out of memory: the meta device says why
            t1 = time.monotonic()
            self._check_fits(task, meta_size(task))  # raises TaskTooLarge when that is why
            self.parts[key] = {"reference_ops_s": round(t1 - t0, 4),
                               "fit_check_s": round(time.monotonic() - t1, 4)}
            if out_of_memory(e):
                if crowded_ok:
                    raise _Crowded() from None
                self._too_large[key] = (f"task {task.task_id}: its reference forward ran out of device "
                                        f"memory with the lanes' device memory reserved whole "
                                        f"({type(e).__name__}: {str(e)[:300]})")
                raise TaskTooLarge(self._too_large[key]) from None
            return frozenset()  # a failing task is reported by the worker
        t1 = time.monotonic()
        in_b, out_b = self.sizes.get(key, (0, 0))
        self._check_fits(task, TaskSize(in_b, out_b, self.param_bytes.get(key, 0)) if in_b or out_b else None)
        self.parts[key] = {"reference_ops_s": round(t1 - t0, 4), "fit_check_s": round(time.monotonic() - t1, 4)}
        return ops

    def _record_ops(self, task: Task, *, quiet: bool = True) -> frozenset:
        try:
            from foundry.evaluate.harness import OpRecorder
            model = self.reference.model(task, {}, SIZING_SEED)
            rec = OpRecorder()
            sizes: dict = {}
            with rec:
                out = self.reference.outputs(model, task, {}, InputSpec(SIZING_INPUT_SEED), sizes=sizes)
            self.sizes[task.source_hash] = (int(sizes.get("input_bytes", 0)), tensor_bytes(out))
            self.param_bytes[task.source_hash] = model_bytes(model)
            del out, model
            return frozenset(rec.compute)
        except Exception:  # noqa: BLE001 - a failing task is reported by the worker
            if not quiet:
                raise
            return frozenset()

    def evaluation_bytes(self, task: Task) -> int:
        """Estimated peak bytes of one evaluation of `task` (0 when unknown), its paired
        trials (one per differential input, known once its degeneracy is) included."""
        key = task.source_hash
        if key not in self._size:
            return 0
        size, full = self._size[key]
        return size.evaluation_bytes(full_trials=full + self._paired.get(key, 0), timing_sets=self.timing_sets(task))

    def timing_sets(self, task: Task) -> int:
        """How many input sets `task`'s candidates are timed on (task_size.timing_sets_that_fit:
        one where more would not fit the device memory the lanes share)."""
        key = task.source_hash
        if key not in self._size:
            return TIMING_SETS
        size, full = self._size[key]
        return timing_sets_that_fit(size, full_trials=full + self._paired.get(key, 0),
                                    capacity_bytes=self._capacity_bytes())

    def _capacity_bytes(self) -> int:
        """The device memory the judge's lanes share (the gate's, else the device's; 0 on
        a CPU, whose workers have their own host-memory caps)."""
        if self.config.device != "cuda":
            return 0
        return self.gate.capacity_bytes or available_bytes("cuda")

    def degeneracy_bytes(self, task: Task) -> int:
        """Estimated peak device bytes of `task`'s degeneracy check (0 when unknown or on
        the CPU)."""
        key = task.source_hash
        if self.config.device != "cuda" or key not in self._size:
            return 0
        return self._size[key][0].degeneracy_bytes(trials=MIN_TRIALS)

    def _release(self) -> None:
        """cuda: the judge's free cached blocks overwritten and given back to the driver
        (the caller holds the gate's shared section, so it runs now): memory the gate no
        longer counts must not stay in this process, out of the workers' reach."""
        if self.config.device == "cuda":
            release(self.gate)

    def screen_bytes(self, task: Task, *, points: int = 1) -> int:
        """Estimated peak bytes of one screen of `points` of `task`'s TUNABLE settings (0
        when unknown)."""
        key = task.source_hash
        return self._size[key][0].screen_bytes(points=points) if key in self._size else 0

    def _check_fits(self, task: Task, size: TaskSize | None) -> None:
        """Fail, naming the task and its sizes, when one evaluation of `size` cannot fit in
        this judge's device (or host) memory; note what it needs."""
        if size is None:
            return
        cfg = self.config
        large = is_large((size.input_bytes, size.output_bytes), cfg)
        full = min(cfg.trials, cfg.full_size_trials) if large else cfg.trials
        self._size[task.source_hash] = (size, full)
        try:
            check_fits(task, size, available_bytes=available_bytes(cfg.device), full_trials=full,
                       timing_sets=self.timing_sets(task),
                       where="GPU memory" if cfg.device == "cuda" else "host memory")
        except TaskTooLarge as e:
            self._too_large[task.source_hash] = str(e)
            raise

    def degeneracy_before(self, task: Task, *, atol: float, rtol: float,
                          phases: PhaseTimes | None = None) -> Degeneracy | None:
        """The task's degeneracy verdict before its first job is planned (the job's paired
        trials follow its differential inputs): at the task's own sizes, with the judge's
        comparison and tolerance, cached on disk per task source, sizes, device, tolerance
        and torch version, and here per task; timed as phase "degeneracy" the first time.
        Where it is not on disk, the check runs in a shared section of the gate with its
        own estimate reserved first (`degeneracy_bytes`), and the judge's cached blocks
        are given back before that reservation ends. None when the check could not run
        (e.g. out of memory): `degeneracy` then judges the first evaluation's reference
        outputs."""
        key = (task.source_hash, repr(atol), repr(rtol))
        if key not in self._degeneracy:
            # one lane at a time per task: the others then read its verdict from the disk cache
            with (phases or PhaseTimes()).measure("degeneracy"), _DEGENERACY_LOCKS.setdefault(key, threading.Lock()):
                verdict = self._known_degeneracy(task, atol=atol, rtol=rtol)
                if verdict is None:
                    with self.gate.memory(self.degeneracy_bytes(task)), self.gate.shared():
                        verdict = self._judge_degeneracy(task, atol=atol, rtol=rtol)
                        self._release()
                self._degeneracy[key] = verdict
        verdict = self._degeneracy[key]
        if verdict is not None and not verdict.degenerate:
            self._paired[task.source_hash] = len(verdict.differential_inputs)
        return verdict

    def degeneracy(self, task: Task, outputs: list[Any], *, atol: float, rtol: float) -> Degeneracy:
        """The verdict the judge applies after a job: `degeneracy_before`'s (run now if it
        was not asked before the job: the caller holds the gate's shared section and this
        evaluation's memory), else (the check could not run) `minimal_check` on `outputs`,
        the reference's outputs on the job's main trials (kept for later evaluations)."""
        key = (task.source_hash, repr(atol), repr(rtol))
        if key not in self._degeneracy:
            self._degeneracy[key] = self._judge_degeneracy(task, atol=atol, rtol=rtol)
        verdict = self._degeneracy[key]
        if verdict is not None:
            return verdict
        if key not in self._fallback:
            self._fallback[key] = minimal_check(outputs)
        return self._fallback[key]

    def _degeneracy_options(self) -> dict:
        cfg = self.config
        return {"device": cfg.device, "cache_dir": os.path.join(cfg.baseline_cache_dir, "degeneracy"),
                "degenerate_ok": cfg.degenerate_ok}

    def _known_degeneracy(self, task: Task, *, atol: float, rtol: float) -> Degeneracy | None:
        try:
            return known_degeneracy(task, atol=atol, rtol=rtol, **self._degeneracy_options())
        except Exception:  # noqa: BLE001 - e.g. a bad DEGENERATE_OK: the full check says so
            return None

    def _judge_degeneracy(self, task: Task, *, atol: float, rtol: float) -> Degeneracy | None:
        try:
            return judge_degeneracy(task, atol=atol, rtol=rtol, **self._degeneracy_options())
        except Exception:  # noqa: BLE001 - e.g. out of memory: the judge's own outputs decide
            return None


class _Crowded(Exception):
    """The reference forward ran out of device memory where one evaluation fits."""


# per (task, tolerance): lanes of one process judge a task's degeneracy one at a time
_DEGENERACY_LOCKS: dict[tuple, threading.Lock] = {}
