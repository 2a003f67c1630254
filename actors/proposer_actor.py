"""`ProposerActor`: the template engine, shared by every island actor of a run.

The template engine reads tasks with torch.fx, so it needs torch (about 250 MB per
process); hosting it once keeps each island actor small. LLM proposers stay inside the
island actors (async HTTP, no torch)."""

from __future__ import annotations

from typing import Any, Mapping

import ray

from actors.parts import make_proposer
from foundry.types import Candidate, ProposalRequest


@ray.remote(num_cpus=0)
class ProposerActor:
    def __init__(self, *, llm: Mapping[str, Any], templates: Mapping[str, Any], seed: int = 0):
        self.proposer = make_proposer(llm=llm, templates=templates, on_llm_call=lambda _r: None,
                                      seed=seed, island_index=0)
        self.count = 0

    async def propose(self, request: ProposalRequest) -> Candidate:
        self.count += 1
        return await self.proposer.propose(request)


class RemoteProposer:
    """The island side: a `Proposer` that asks the shared `ProposerActor`."""

    def __init__(self, handle: Any):
        self.handle = handle

    async def propose(self, request: ProposalRequest) -> Candidate:
        return await self.handle.propose.remote(request)

    async def aclose(self) -> None:
        return None
