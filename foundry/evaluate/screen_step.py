"""The screening step, the judge's side: every setting of a candidate's TUNABLE built,
checked once and timed briefly in one sandbox job (screen_run.py is the worker's side,
screening.py collects its messages into one advisory ScreenedPoint per setting).

The reference output of the one trial is computed before the job (in the gate's shared
section) and dropped before the clean-up; the device memory the screen needs is reserved
for the whole job.
"""

from __future__ import annotations

import logging
import secrets
from typing import Any, Callable

from foundry.evaluate.backends import BackendSpec
from foundry.evaluate.config import EvalConfig
from foundry.evaluate.device_gate import DeviceGate
from foundry.evaluate.device_memory import OOM_RETRY_WAIT_S, judge_out_of_memory
from foundry.evaluate.job import Job
from foundry.evaluate.jobs import screen_job
from foundry.evaluate.sandbox import JobOutcome
from foundry.evaluate.screening import ScreenCollector
from foundry.evaluate.task_setup import TaskSetup
from foundry.evaluate.warm_worker import WarmWorker
from foundry.types import Candidate, ScreenedPoint, Task

log = logging.getLogger(__name__)


def refused(points: tuple, why: str) -> tuple[ScreenedPoint, ...]:
    """Every point of a screen that could not run, failed with `why`."""
    return tuple(ScreenedPoint(p, False, None, why) for p in points)


class ScreenStep:
    """`clean`: the judge's scrubbing of error text; `release`: its release of device memory."""

    def __init__(self, *, config: EvalConfig, gate: DeviceGate, setup: TaskSetup, worker: WarmWorker,
                 clean: Callable[[str], str], release: Callable[[], None]):
        self.config, self.gate, self.setup, self.worker = config, gate, setup, worker
        self._clean, self._release = clean, release

    def screen(self, task: Task, candidate: Candidate, points: tuple, backend: BackendSpec, ref_ops: frozenset, *,
               atol: float, rtol: float, reference: Callable[[Job], Any],
               run: Callable[..., JobOutcome]) -> tuple[ScreenedPoint, ...]:
        """`reference(job)`: the reference output of the job's one trial; `run(job,
        deadline_s=, task=, on_message=)` runs a sandbox job."""
        cfg = self.config
        base = cfg.seed if cfg.seed is not None else secrets.randbits(48)
        job = screen_job(task, candidate, backend, cfg, points=points, base=base)
        self.worker.ensure_preloaded(backend.preload)
        deadline = cfg.timeout_s * max(1.0, len(points) / 2)
        with self.gate.memory(self.setup.screen_bytes(task, points=len(points)) if cfg.device == "cuda" else 0):
            with self.gate.shared():
                ref = reference(job)
            collector = ScreenCollector(points=points, reference=ref, atol=atol, rtol=rtol,
                                        reference_ops=ref_ops, launch_key=backend.launch_key,
                                        allow_torch_ops=cfg.allow_torch_ops)
            out = run(job, deadline_s=deadline, task=task, on_message=collector.on_message)
            del ref
            collector.drop_reference()  # before the clean-up
            out.drop_tensors()
            with self.gate.shared():
                self._release()
        job_error = "" if out.of_kind("done") else self._clean(out.exit_text())
        errors = out.of_kind("error")
        if errors:
            job_error = self._clean(str(errors[0].header.get("error", "")))
        return collector.results(job_error=job_error)

    def guarded(self, attempt: Callable[[], tuple], *, task: Task, candidate: Candidate,
                points: tuple) -> tuple[ScreenedPoint, ...]:
        """`attempt()` (the screen), tried again once after the judge's own out-of-memory (as
        an evaluation is); any other failure in the judge fails every point with its reason."""
        try:
            try:
                return attempt()
            except Exception as e:  # noqa: BLE001 - as in evaluate: the judge's own out-of-memory, once
                if not judge_out_of_memory(e):
                    raise
            # out of the except clause, whose traceback kept the first attempt's frames (its
            # reference output among them) alive
            self._release()
            self.gate.wait_for_reservations(timeout_s=OOM_RETRY_WAIT_S)
            return attempt()
        except Exception as e:  # noqa: BLE001 - a failed screen picks no finalist; the default is judged
            log.warning("screen of %s on %s failed in the judge", candidate.candidate_id, task.task_id, exc_info=True)
            return refused(points, f"the screen failed in the judge: {type(e).__name__}: {e}"[:500])
