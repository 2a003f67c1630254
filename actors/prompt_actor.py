"""`PromptEvolverActor`: the one holder of the prompt population; aggregates strategy
outcomes from every island (a thin async shell over `PromptService`)."""

from __future__ import annotations

import os
from typing import Any, Mapping

import ray

from actors.prompt_service import PromptService


def _row(record: Any) -> dict:
    return record.to_row() if hasattr(record, "to_row") else dict(record)


@ray.remote(num_cpus=0)
class PromptEvolverActor:
    def __init__(self, *, prompt: Mapping[str, Any], llm: Mapping[str, Any], seed: int = 0,
                 state_path: str | None = None):
        self.state_path = state_path
        self.calls: list[dict] = []
        self.service = PromptService(prompt=prompt, llm=llm, seed=seed,
                                     on_llm_call=lambda r: self.calls.append(_row(r)))
        if state_path and os.path.exists(state_path):
            self.service.load(state_path)

    async def pick(self, **kw: Any) -> tuple[str, dict]:
        return await self.service.pick(**kw)

    async def report(self, **kw: Any) -> None:
        await self.service.report(**kw)

    async def exchange(self, outcomes: list, count: int) -> list:
        """Record a batch of outcomes, then pick `count` prompts."""
        for kw in outcomes:
            await self.service.report(**kw)
        return [await self.service.pick() for _ in range(count)]

    def drain_calls(self) -> list[dict]:
        out, self.calls = self.calls, []
        return out

    def save(self) -> None:
        if self.state_path:
            self.service.save(self.state_path)

    def stats(self) -> dict:
        return self.service.stats()
