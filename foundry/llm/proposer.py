"""`LLMProposer`: the LLM as the mutation operator.

`propose(request)` builds the prompt for the request's mode, sends it through the shared
`LLMClient`, and turns the reply into a `Candidate` (origin "llm", strategy_id = the
request's prompt id, parent ids, island, generation). A reply with no usable code, or a
call that failed after its retries, gives a candidate with empty `source` and the reason
in `note` (the judge scores it stage 0); the island keeps going. Only `BudgetExhausted`
propagates: no new call may start, and `exc.budget` names the budget that ended the run.
"""

from __future__ import annotations

import random

from foundry.llm.accounting import CallSink, redact
from foundry.llm.budget import Budget
from foundry.llm.client import LLMClient
from foundry.llm.config import LLMConfig
from foundry.llm.parsing import parse_reply
from foundry.llm.prompt_builder import build_messages
from foundry.types import Candidate, ProposalRequest, Proposer, content_hash


class LLMProposer(Proposer):
    """Proposes children with an OpenAI-compatible model (or an ensemble)."""

    def __init__(self, config: LLMConfig, *, on_call: CallSink | None = None,
                 client: LLMClient | None = None, budget: Budget | None = None):
        self.config = config
        self.client = client or LLMClient(config, on_call=on_call, budget=budget)

    @property
    def budget(self) -> Budget:
        return self.client.budget

    def messages_for(self, request: ProposalRequest) -> list[dict]:
        return build_messages(request, reply_format=self.config.reply_format,
                              secrets=self.client.secrets)

    async def propose(self, request: ProposalRequest) -> Candidate:
        messages = self.messages_for(request)
        rng = random.Random(f"{request.seed}:{request.island_id}:{request.generation}")
        reply = await self.client.complete(
            messages, purpose="propose", rng=rng, seed=request.seed,
            task_id=request.task.task_id, island_id=request.island_id,
            prompt_id=request.prompt_id)
        parent = request.parent
        if reply.ok:
            parsed = parse_reply(reply.text, parent_source=parent.source if parent else None,
                                 max_source_chars=self.config.max_source_chars)
            source, note = parsed.source, parsed.note
            if reply.finish_reason == "length" and not source:
                note += " (the reply was cut off at llm.max_tokens)"
        else:
            source = ""
            note = f"llm call {reply.outcome} after {reply.attempts} attempt(s): {reply.error}"
        note = redact(f"[{reply.model}] {note}".strip(), self.client.secrets)
        fields = dict(parent_ids=(parent.candidate_id,) if parent else (),
                      island_id=request.island_id, generation=request.generation,
                      strategy_id=request.prompt_id, origin="llm", note=note)
        if source:
            return Candidate.make(task_id=request.task.task_id, source=source,
                                  backend=request.backend, params={}, **fields)
        # No code: every such event is its own record (the id also hashes the reason,
        # the parent and the generation, so failures do not collapse into one id).
        cid = content_hash("", request.task.task_id, request.backend, note,
                           ",".join(fields["parent_ids"]), str(request.island_id),
                           str(request.generation), str(request.seed))
        return Candidate(candidate_id=cid, task_id=request.task.task_id, source="",
                         backend=request.backend, **fields)

    async def aclose(self) -> None:
        await self.client.aclose()


def make_proposer(config: LLMConfig, *, on_call: CallSink | None = None,
                  budget: Budget | None = None) -> LLMProposer | None:
    """The LLM proposer for `config`, or None when `llm.provider` is `none`."""
    if not config.enabled:
        return None
    return LLMProposer(config, on_call=on_call, budget=budget)
