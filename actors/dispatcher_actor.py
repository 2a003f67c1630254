"""`DispatcherActor`: the one place candidates are queued and balanced over evaluators
(an async actor over `actors.dispatch.Balancer`)."""

from __future__ import annotations

from typing import Any

import ray
from ray.exceptions import RayActorError

from actors.dispatch import Balancer, EvaluationLost, Refused, WorkerLost
from foundry.types import Candidate, EvalResult, Stage, Task


def _caller(handle):
    async def call(payload):
        task, candidate = payload
        try:
            return await handle.evaluate.remote(task, candidate)
        except RayActorError as e:
            raise WorkerLost(type(e).__name__) from None
    return call


def _failed(candidate: Candidate, error: str) -> EvalResult:
    return EvalResult(candidate_id=candidate.candidate_id, task_id=candidate.task_id,
                      stage=int(Stage.RUNTIME), correct=False, error=error[:500])


@ray.remote(num_cpus=0)
class DispatcherActor:
    def __init__(self, *, budget: int | None, budget_per_key: int | None,
                 spent_per_key: dict | None = None, max_attempts: int = 3, retry_delay_s: float = 0.5):
        self.balancer = Balancer(budget=budget, budget_per_key=budget_per_key,
                                 spent_per_key=dict(spent_per_key or {}),
                                 max_attempts=max_attempts, retry_delay_s=retry_delay_s)

    async def add_evaluators(self, handles: dict, slots: int = 1) -> None:
        for name, handle in handles.items():
            self.balancer.add_worker(name, _caller(handle), slots=slots)

    async def submit(self, task: Task, candidate: Candidate) -> tuple:
        """Returns (candidate as evaluated, result, evaluator name, refusal). A refusal
        ("all: ..."/"key: ...") comes with no result; a candidate that lost its evaluator
        too often, or met an evaluator error, gets a runtime-stage result saying so."""
        try:
            evaluated, result, name = await self.balancer.submit((task, candidate), key=task.task_id)
            return evaluated, result, name, ""
        except Refused as r:
            return candidate, None, "", f"{r.scope}: {r.reason}"
        except EvaluationLost as e:
            return candidate, _failed(candidate, str(e)), "", ""
        except Exception as e:  # noqa: BLE001 - an evaluator bug must not stop the island
            return candidate, _failed(candidate, f"evaluator error: {type(e).__name__}: {e}"), "", ""

    def close(self, reason: str, key: str | None = None) -> None:
        self.balancer.close(reason, key)

    def stats(self) -> dict[str, Any]:
        return self.balancer.stats()
