"""`IslandActor`: island i of every task (a thin async shell over `IslandWorker`).

Ray restarts a crashed island actor (`max_restarts`); `__init__` then reloads its last
checkpoint and the driver replays what the run log holds beyond it and calls `run` again.
Each incarnation submits under its own `origin`, so the dispatcher's ledger can tell the
driver what a dead one had evaluated but never handed over.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import uuid
from typing import Any, Mapping

import ray
from ray.exceptions import RayActorError

from actors.island_host import IslandHost
from actors.island_worker import IslandWorker, SeedOutcome
from actors.parts import make_island, make_proposer
from actors.proposer_actor import RemoteProposer
from foundry.types import Candidate, EvalResult, Task


class _PromptClient:
    """Calls the prompt evolver actor in batches (picks fetched `batch` at a time, outcomes
    sent with the next fetch), so prompts cost no round trip per candidate; while the
    actor is down the island goes on without prompts."""

    def __init__(self, handle: Any, batch: int = 8):
        self.handle, self.batch = handle, batch
        self.picks: list = []
        self.outcomes: list = []

    async def pick(self, **kw: Any) -> tuple[str, dict]:
        if not self.picks:
            outcomes, self.outcomes = self.outcomes, []
            try:
                self.picks = list(await self.handle.exchange.remote(outcomes, self.batch))
            except RayActorError:
                return "", {}
        return self.picks.pop()

    async def report(self, **kw: Any) -> None:
        self.outcomes.append(kw)

    async def flush(self) -> None:
        outcomes, self.outcomes = self.outcomes, []
        if outcomes:
            try:
                await self.handle.exchange.remote(outcomes, 0)
            except RayActorError:
                pass


def _call_row(record: Any) -> dict:
    if hasattr(record, "to_row"):
        return record.to_row()
    if dataclasses.is_dataclass(record):
        return dataclasses.asdict(record)
    return dict(record)


@ray.remote(num_cpus=0)
class IslandActor:
    def __init__(self, *, island_index: int, tasks: Mapping[str, Task], settings: Mapping[str, Any],
                 dispatcher: Any, prompt_actor: Any | None, checkpoint_dir: str):
        self.checkpoint_dir = checkpoint_dir
        self.checkpoint_every_s = float(settings.get("checkpoint_every_s", 30.0))
        seed = int(settings.get("seed", 0))
        hosts = {t: IslandHost(make_island(island=settings["island"], island_index=island_index,
                                           task_id=t, seed=seed)) for t in tasks}
        if settings.get("proposer_actor") is not None:  # the shared template engine
            proposer: Any = RemoteProposer(settings["proposer_actor"])
        else:
            proposer = make_proposer(llm=settings["llm"], templates=settings["templates"],
                                     on_llm_call=self._on_llm_call, seed=seed, island_index=island_index,
                                     island_count=int(settings["island"].get("count", 1)),
                                     impl=settings.get("proposer_impl"))

        self.origin = f"island-{island_index}-{uuid.uuid4().hex[:12]}"

        async def submit(task: Task, candidate: Candidate):
            return await dispatcher.submit.remote(task, candidate, self.origin)

        async def profile(task: Task, candidate: Candidate, result: EvalResult, evaluator: str):
            return await dispatcher.profile.remote(evaluator, task, candidate, result)

        self.worker = IslandWorker(
            island_index=island_index, tasks=tasks, hosts=hosts, proposer=proposer, submit=submit,
            prompts=_PromptClient(prompt_actor) if prompt_actor is not None else None,
            backend=settings["backend"], in_flight=int(settings.get("in_flight", 2)),
            max_duplicates=int(settings.get("max_duplicates", 64)),
            hardware=settings.get("hardware") or {},
            profile=profile if settings.get("profile_elites", True) else None)
        self.restored = self.worker.restore(checkpoint_dir)

    def _on_llm_call(self, record: Any) -> None:
        self.worker.llm_calls.append(_call_row(record))

    async def run(self) -> str:
        saver = asyncio.ensure_future(self._checkpoint_loop())
        try:
            return await self.worker.run()
        finally:
            saver.cancel()
            if isinstance(self.worker.prompts, _PromptClient):
                await self.worker.prompts.flush()
            self.worker.checkpoint(self.checkpoint_dir)

    async def _checkpoint_loop(self) -> None:
        while self.checkpoint_every_s > 0:
            await asyncio.sleep(self.checkpoint_every_s)
            self.worker.checkpoint(self.checkpoint_dir)

    def drain(self) -> dict:
        return {**self.worker.drain(), "origin": self.origin}

    def stop(self, reason: str) -> None:
        self.worker.stop(reason)

    def retire(self, task_id: str, reason: str) -> None:
        self.worker.retire(task_id, reason)

    def emigrants(self) -> dict:
        return self.worker.emigrants()

    def immigrate(self, by_task: dict) -> int:
        return self.worker.immigrate(by_task)

    def replay(self, records: list[tuple[Candidate, EvalResult]]) -> int:
        return self.worker.replay(records)

    def resubmit(self, candidates: list[Candidate]) -> int:
        return self.worker.resubmit(candidates)

    def expect_seeds(self, task_ids: list[str]) -> None:
        self.worker.expect_seeds(task_ids)

    def seed_failed(self, task_id: str) -> None:
        self.worker.seed_failed(task_id)

    def seed(self, candidate: Candidate) -> SeedOutcome:
        return self.worker.seed(candidate)

    def checkpoint(self) -> None:
        self.worker.checkpoint(self.checkpoint_dir)

    def node(self) -> str:
        """The id of the Ray node this incarnation runs on."""
        return ray.get_runtime_context().get_node_id()

    def status(self) -> dict:
        return {"pid": os.getpid(), "restored": self.restored,
                "held": {t: len(h.island.history) for t, h in self.worker.hosts.items()}}
