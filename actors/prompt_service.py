"""Prompt selection and evolution as the runtime uses it (pure, no Ray): one
`PromptPopulation` (foundry.llm) shared by every island, the LLM client that edits its
sections when an LLM is configured, and its state file. `PromptEvolverActor` wraps it."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Callable, Mapping

from foundry.store.rundir import write_atomic


class PromptService:
    def __init__(self, *, prompt: Mapping[str, Any], llm: Mapping[str, Any], seed: int = 0,
                 on_llm_call: Callable[[Any], None] | None = None):
        from foundry.llm import LLMClient, LLMConfig, PromptEvolutionConfig, PromptPopulation
        self.config = PromptEvolutionConfig.from_config(dict(prompt))
        self.population = PromptPopulation(self.config)
        llm_config = LLMConfig.from_config(dict(llm))
        self.client = LLMClient(llm_config, on_call=on_llm_call) if llm_config.enabled else None
        self.rng = random.Random(f"prompts/{seed}")

    async def pick(self, **_: Any) -> tuple[str, dict]:
        v = self.population.select(self.rng)
        return v.prompt_id, dict(v.sections)

    async def report(self, *, prompt_id: str, island_id: int, improved: bool, fitness_delta: float,
                     correct: bool) -> None:
        if not prompt_id:
            return
        self.population.report(prompt_id=prompt_id, island_id=island_id, improved=improved,
                               fitness_delta=fitness_delta, correct=correct)
        if self.population.edit_due:
            await self.population.evolve(client=self.client, rng=self.rng)

    def save(self, path: str | Path) -> None:
        write_atomic(Path(path), json.dumps(self.population.to_state(), default=str))

    def load(self, path: str | Path) -> None:
        from foundry.llm import PromptPopulation
        self.population = PromptPopulation.from_state(json.loads(Path(path).read_text()), self.config)

    def stats(self) -> dict:
        return {"prompts": [s.__dict__ for s in self.population.stats()],
                "edits": len(self.population.edits)}
