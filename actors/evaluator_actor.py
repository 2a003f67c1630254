"""`EvaluatorActor`: one per GPU (`num_gpus=1`), or CPU evaluators where there is no GPU.

A thin shell over `foundry.evaluate.Evaluator` (which runs candidates in sandbox
workers, never in this process). Options (GPU, CPUs, restarts, concurrency) are given
by `evaluator_options`. After a crash Ray restarts it (`max_restarts`) and `__init__`
builds a fresh evaluator; the dispatcher re-queues what was in flight.
"""

from __future__ import annotations

import os
import socket
from typing import Any, Mapping

import ray

from actors.evaluation import EvaluationService
from actors.parts import make_evaluator
from foundry.types import Candidate, EvalResult, Task


@ray.remote
class EvaluatorActor:
    def __init__(self, *, name: str, eval_config: Mapping[str, Any], impl: str | None = None,
                 tuning: Mapping[str, Any] | None = None):
        self.name = name
        self.evaluator = make_evaluator(eval_config, impl=impl)
        self.service = EvaluationService(evaluator=self.evaluator, tuning=tuning,
                                         device=str(eval_config.get("device", "cpu")))
        self.count = 0

    def evaluate(self, task: Task, candidate: Candidate) -> tuple[Candidate, EvalResult, str]:
        """(the candidate as evaluated (tuned params where it declares TUNABLE and tuning
        is on), its result, this evaluator's name)."""
        candidate, result = self.service.run(task, candidate)
        self.count += 1
        return candidate, result, self.name

    def baselines(self, task: Task) -> Any:
        return self.evaluator.baselines(task=task)

    def info(self) -> dict:
        return {"name": self.name, "pid": os.getpid(), "host": socket.gethostname(),
                "gpu_ids": [str(g) for g in ray.get_gpu_ids()], "evaluated": self.count,
                "measurements": self.service.measurements}

    def close(self) -> None:
        close = getattr(self.evaluator, "close", None)
        if close is not None:
            close()


def evaluator_options(*, gpu: bool, cpus: float, max_restarts: int, slots: int) -> dict:
    return {"num_gpus": 1 if gpu else 0, "num_cpus": cpus, "max_restarts": max_restarts,
            "max_task_retries": 0, "max_concurrency": max(1, slots)}
