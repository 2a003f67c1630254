"""Budgets stop new calls when reached and say which budget ended the run."""

from __future__ import annotations

import asyncio

import pytest

from foundry.llm import Budget, BudgetConfig, BudgetExhausted, LLMClient, LLMProposer
from foundry.types import ProposalRequest
from support.openai_server import ScriptedResponse

from llm_helpers import PARENT_SOURCE, make_config

MSG = [{"role": "user", "content": "write a kernel " * 40}]


async def test_max_calls_stops_new_calls(server):
    records = []
    client = LLMClient(make_config(server, budget={"max_calls": 3}), on_call=records.append)
    for _ in range(3):
        assert (await client.complete(MSG)).ok
    with pytest.raises(BudgetExhausted) as exc:
        await client.complete(MSG)
    assert exc.value.budget == "max_calls" and "3 of 3" in str(exc.value)
    assert client.budget.exhausted_by == "max_calls"
    assert len(server.chat_requests()) == 3 and len(records) == 4
    assert records[-1].outcome == "budget" and "max_calls" in records[-1].error
    with pytest.raises(BudgetExhausted):  # stays ended
        await client.complete(MSG)


async def test_retries_count_against_max_calls(server):
    records = []
    client = LLMClient(make_config(server, budget={"max_calls": 2}), on_call=records.append)
    server.push(*[ScriptedResponse.server_error(500)] * 3)
    reply = await client.complete(MSG)
    assert reply.outcome == "server_error" and reply.attempts == 2
    assert "not retried" in reply.error and "max_calls" in reply.error
    assert records[-1].final and len(server.chat_requests()) == 2


async def test_max_tokens_budget(server):
    client = LLMClient(make_config(server, budget={"max_tokens": 500}))
    server.push(ScriptedResponse.text("x", usage={"prompt_tokens": 300, "completion_tokens": 250}))
    await client.complete(MSG)
    with pytest.raises(BudgetExhausted) as exc:
        await client.complete(MSG)
    assert exc.value.budget == "max_tokens"
    snap = client.budget.snapshot()
    assert snap.tokens == 550 and snap.exhausted_by == "max_tokens"


async def test_max_cost_budget_uses_prices_per_million_tokens(server):
    cfg = make_config(server, prices={"scripted-model": {"input": 1000.0, "output": 2000.0}},
                      budget={"max_cost_usd": 1.0})
    client = LLMClient(cfg)
    usage = {"prompt_tokens": 400, "completion_tokens": 100}  # $0.4 + $0.2
    server.push(ScriptedResponse.text("a", usage=usage), ScriptedResponse.text("b", usage=usage))
    r1 = await client.complete(MSG)
    assert r1.cost_usd == pytest.approx(0.6)
    await client.complete(MSG)
    with pytest.raises(BudgetExhausted) as exc:
        await client.complete(MSG)
    assert exc.value.budget == "max_cost_usd"
    assert client.budget.snapshot().cost_usd == pytest.approx(1.2)


async def test_max_wall_budget_and_timeout_shortened_to_it(server):
    client = LLMClient(make_config(server, timeout_s=30.0, max_retries=0,
                                   budget={"max_wall_s": 0.6}))
    server.push(ScriptedResponse.delayed(5.0))
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    reply = await client.complete(MSG)
    assert reply.outcome == "timeout" and loop.time() - t0 < 2.0
    with pytest.raises(BudgetExhausted) as exc:
        await client.complete(MSG)
    assert exc.value.budget == "max_wall_s"


async def test_proposer_raises_budget_exhausted_with_name(server, relu_task):
    proposer = LLMProposer(make_config(server, budget={"max_calls": 1}))
    req = ProposalRequest(task=relu_task, backend="c", mode="translate")
    server.push(ScriptedResponse.full_file(PARENT_SOURCE))
    assert (await proposer.propose(req)).source
    with pytest.raises(BudgetExhausted) as exc:
        await proposer.propose(req)
    assert exc.value.budget == "max_calls" and proposer.budget.exhausted_by == "max_calls"


async def test_concurrent_calls_never_exceed_max_calls(server):
    client = LLMClient(make_config(server, budget={"max_calls": 5, "max_concurrency": 8}))
    results = await asyncio.gather(*(client.complete(MSG) for _ in range(12)),
                                   return_exceptions=True)
    assert sum(isinstance(r, BudgetExhausted) for r in results) == 7
    assert len(server.chat_requests()) == 5


def test_budget_unit_counts_and_names():
    t = [0.0]
    b = Budget(BudgetConfig(max_calls=None, max_wall_s=10.0), clock=lambda: t[0])
    b.admit()
    b.charge(prompt_tokens=10, completion_tokens=5, cost_usd=0.01)
    assert b.snapshot().tokens == 15 and b.exhausted_by is None
    t[0] = 10.5
    with pytest.raises(BudgetExhausted) as exc:
        b.check()
    assert exc.value.budget == "max_wall_s" and b.exhausted_by == "max_wall_s"


def test_budget_shared_over_processes_never_exceeds_the_whole():
    whole = BudgetConfig(max_calls=10, max_tokens=1001, max_cost_usd=3.0, max_wall_s=60,
                         max_concurrency=32)
    part = whole.share(3)
    assert part.max_calls * 3 <= 10 and part.max_tokens * 3 <= 1001
    assert part.max_cost_usd * 3 == pytest.approx(3.0) and part.max_wall_s == 60
    assert part.max_concurrency == 10
    assert BudgetConfig(max_calls=2).share(4).max_calls == 0  # exact, never over
    assert BudgetConfig().share(4).max_calls is None
