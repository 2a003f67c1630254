"""`EvaluatorActor`: one per GPU (`num_gpus=1`), or CPU evaluators where there is no GPU.

A thin shell over `foundry.evaluate.Evaluator` (which runs candidates in sandbox
workers, never in this process). With `lanes` > 1 it holds that many Evaluators over its
one device, sharing a `DeviceGate`: one candidate's build and trials overlap another's
timed runs, which still have the device to themselves; Ray calls `evaluate` from up to
`lanes` threads at once (`max_concurrency`), each taking a free lane. Options (GPU,
CPUs, restarts, concurrency) are given by `evaluator_options`. After a crash Ray
restarts it (`max_restarts`) and `__init__` builds fresh evaluators; the dispatcher
re-queues what was in flight.
"""

from __future__ import annotations

import dataclasses
import os
import queue
import socket
import time
from typing import Any, Iterable, Mapping

import ray

from actors.evaluation import EvaluationService
from actors.parts import device_ceilings, make_device_gate, make_evaluator
from foundry.evaluate.hardware_profile import HardwareProfiler
from foundry.tuning.explored import ExploredPoints
from foundry.types import Candidate, EvalResult, Task


@ray.remote
class EvaluatorActor:
    def __init__(self, *, name: str, eval_config: Mapping[str, Any], impl: str | None = None,
                 tuning: Mapping[str, Any] | None = None, lanes: int = 1, backend: str | None = None,
                 seed_timeout_s: float = 300.0, ncu_share: float = 0.05, covered: Iterable[str] = ()):
        """`covered`: tasks an earlier session of the run has a correct kernel for (with
        `tune_uncovered` false, their candidates are tuned from the start)."""
        self.name = name
        self.node_id = ray.get_runtime_context().get_node_id()  # where Ray placed it
        device = str(eval_config.get("device", "cpu"))
        self.device, self.impl = device, impl
        self.threads = int(eval_config.get("threads", 1))
        self.gate = make_device_gate(device, lanes=lanes)
        self.seeds = None
        if not impl:  # imported here: it loads torch, which a stand-in evaluator's process does without
            from actors.seeding import SeedService
            self.seeds = SeedService(device=device, backend=backend, timeout_s=seed_timeout_s,
                                     threads=self.threads, gate=self.gate)
        # before any lane runs: measuring the device's ceilings must not overlap a timed section
        self.ceilings, self.ceilings_note = device_ceilings(device) if not impl else (None, "a stand-in evaluator")
        explored = ExploredPoints()  # the lanes' tuners share what each parameter space gave
        covered: set = set(covered)  # and which tasks have a correct kernel
        self.services = [EvaluationService(evaluator=make_evaluator(eval_config, impl=impl, gate=self.gate,
                                                                    backend=backend),
                                           tuning=tuning, device=device, ceilings=self.ceilings,
                                           explored=explored, covered=covered)
                         for _ in range(max(1, lanes))]
        # elites' hardware metrics, each with the device to itself (GPU runs only)
        self.profiler = None if impl else HardwareProfiler(device=device, gate=self.gate, ncu_share=ncu_share)
        self._free: queue.Queue = queue.Queue()
        for service in self.services:
            self._free.put(service)
        self.count = 0
        self.busy_s = 0.0  # lane-seconds spent on evaluations, all lanes together

    def evaluate(self, task: Task, candidate: Candidate, tune: bool = True) -> tuple[Candidate, EvalResult, str]:
        """(the candidate as evaluated (tuned params where it declares TUNABLE, tuning is
        on and `tune`), its result, this evaluator's name)."""
        service = self._free.get()
        started, wall = time.monotonic(), time.time()
        try:
            candidate, result = service.run(task, candidate, tune=tune)
        finally:
            self._free.put(service)
        busy = time.monotonic() - started
        self.count += 1
        self.busy_s += busy
        # where the lane's time went: when it began (epoch s) and how long the candidate held it,
        # tuning included
        lane = {"index": self.services.index(service), "started_at": round(wall, 3), "busy_s": round(busy, 3),
                "node_id": self.node_id}
        result = dataclasses.replace(result, metrics={**(result.metrics or {}), "lane": lane})
        return candidate, result, self.name

    def profile_elite(self, task: Task, candidate: Candidate, result: EvalResult) -> dict | None:
        """Hardware metrics of an elite this evaluator judged, for its result's metrics
        (foundry.evaluate.hardware_profile); None off the GPU."""
        if self.profiler is None:
            return None
        profile = self.profiler.profile(task=task, candidate=candidate, result=result)
        return profile.as_metrics() if profile is not None else None

    def device_facts(self) -> dict:
        """What a kernel writer should know about this evaluator's device (the prompts'
        hardware section): the GPU's properties and measured ceilings, or the CPU and the
        threads a candidate gets; empty for a stand-in evaluator."""
        from foundry import hardware
        if self.impl:
            return {}
        if self.device == "cuda":
            return hardware.prompt_facts(hardware.describe())
        return hardware.cpu_prompt_facts(threads=self.threads)

    def baselines(self, task: Task) -> Any:
        service = self._free.get()
        try:
            return service.evaluator.baselines(task=task)
        finally:
            self._free.put(service)

    def compiler_seed(self, task: Task) -> tuple[Candidate | None, str]:
        """The task's compiler seed for this evaluator's device (made once, in a process of
        its own, and kept on disk), or None with the reason."""
        if self.seeds is None:
            return None, "no compiler seed with a stand-in evaluator"
        return self.seeds.candidate(task)

    def info(self) -> dict:
        return {"name": self.name, "pid": os.getpid(), "host": socket.gethostname(), "node_id": self.node_id,
                "gpu_ids": [str(g) for g in ray.get_gpu_ids()], "evaluated": self.count,
                "lanes": len(self.services), "busy_s": round(self.busy_s, 3), "gate": self.gate.snapshot(),
                "ceilings": getattr(self.ceilings, "source", None) or self.ceilings_note,
                "measurements": sum(s.measurements for s in self.services)}

    def close(self) -> None:
        for service in self.services:
            close = getattr(service.evaluator, "close", None)
            if close is not None:
                close()


def evaluator_options(*, gpu: bool, cpus: float, max_restarts: int, slots: int, seeds: int = 1) -> dict:
    return {"num_gpus": 1 if gpu else 0, "num_cpus": cpus, "max_restarts": max_restarts,
            # + 2 + seeds: `info`, a `profile_elite` and the `compiler_seed` calls the driver
            # keeps in flight, while every lane is busy
            "max_task_retries": 0, "max_concurrency": max(1, slots) + 2 + max(1, seeds)}
