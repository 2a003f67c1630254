"""The baseline step: a task's eager and torch.compile times, from the disk cache
(baselines.py) or measured in a trusted baseline job.

Lanes of one process measure a task's baselines one at a time (a lock per cache key),
each timed part with the device to itself; a lane that waited finds the record another
lane measured. Only a measurement with an eager time is cached: a failed one is measured
again next time, its error kept in the result's metrics.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Callable

from foundry.evaluate.baselines import Baseline, BaselineCache, baseline_from, baseline_key
from foundry.evaluate.config import EvalConfig
from foundry.evaluate.device_gate import DeviceGate
from foundry.evaluate.job import Job
from foundry.evaluate.jobs import baseline_job
from foundry.evaluate.phases import PhaseTimes
from foundry.evaluate.sandbox import JobOutcome
from foundry.evaluate.task_size import TaskTooLarge
from foundry.types import Task

# per baseline key: lanes of one process measure a task's baselines one at a time
_BASELINE_LOCKS: dict[str, threading.Lock] = {}


class BaselineStep:
    """`clean`: the judge's scrubbing of error text (secrets, length)."""

    def __init__(self, *, config: EvalConfig, hardware: str, gate: DeviceGate, clean: Callable[[str], str]):
        self.config, self.hardware, self.gate, self._clean = config, hardware, gate, clean
        self.cache = BaselineCache(config.baseline_cache_dir)

    def key(self, task: Task) -> str:
        cfg = self.config
        return baseline_key(task, device=cfg.device, hardware=self.hardware, threads=cfg.threads,
                            compile_mode=cfg.compile_mode)

    def cached(self, key: str) -> Baseline | None:
        cached = self.cache.get(key)
        if cached and cached.eager_ms and (cached.compile_ms or cached.error or not self.config.compile_baseline):
            return cached
        return None

    def baseline(self, task: Task, phases: PhaseTimes, *, prepare: Callable[[Task, PhaseTimes], object],
                 run: Callable[..., JobOutcome], device_bytes: Callable[[Task], int]) -> Baseline:
        """The cached record, else one measured now: `prepare(task, phases)` is the task's
        setup (it raises TaskTooLarge), `run(job, deadline_s=, task=)` runs a sandbox job,
        `device_bytes(task)` is reserved on the gate while it runs."""
        key = self.key(task)
        cached = self.cached(key)
        if cached is not None:
            return cached
        try:
            prepare(task, phases)
        except TaskTooLarge as e:
            return Baseline(eager_ms=None, error=str(e))
        job: Job = baseline_job(task, self.config)
        # one lane at a time per task; each timed part has the device to itself
        with _BASELINE_LOCKS.setdefault(key, threading.Lock()), self.gate.memory(device_bytes(task)):
            cached = self.cached(key)  # another lane may have measured it meanwhile
            if cached is not None:
                return cached
            out = run(job, deadline_s=self.config.baseline_timeout_s, task=task)
            b = baseline_from(out, phases, compile_expected=job.compile_baseline)
            b = dataclasses.replace(b, error=self._clean(b.error))
            if b.eager_ms:
                self.cache.put(key, b)
        return b
