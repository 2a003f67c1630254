"""The proposer through the real `openai` client over real HTTP against the scripted
server: every kind of reply is recorded and the caller keeps going."""

from __future__ import annotations

import time

import pytest

from foundry.llm import LLMProposer
from foundry.types import Candidate, EvalResult, ProposalRequest
from support.openai_server import ScriptedResponse

from llm_helpers import PARENT_SOURCE, make_config


def _parent(task) -> tuple[Candidate, EvalResult]:
    parent = Candidate.make(task_id=task.task_id, source=PARENT_SOURCE, backend="c", island_id=2)
    result = EvalResult(candidate_id=parent.candidate_id, task_id=task.task_id, stage=5,
                        correct=True, speedup_eager=1.3, runtime_ms=0.05, descriptor=(0, 1, 0))
    return parent, result


def _request(task, mode="optimize", **kw) -> ProposalRequest:
    parent, result = _parent(task)
    if mode == "translate":
        parent = result = None
    return ProposalRequest(task=task, backend="c", mode=mode, island_id=2, generation=7,
                           parent=parent, parent_result=result, prompt_id="p-test", seed=11, **kw)


@pytest.fixture
def records():
    return []


@pytest.fixture
def proposer(server, records):
    p = LLMProposer(make_config(server), on_call=records.append)
    yield p


async def test_full_file_reply_becomes_candidate(server, proposer, records, relu_task):
    server.push(ScriptedResponse.full_file(PARENT_SOURCE.replace("0.f ? x[i]", "0.0f ? x[i]")))
    cand = await proposer.propose(_request(relu_task))
    assert "0.0f ? x[i]" in cand.source and "class ModelNew" in cand.source
    assert cand.origin == "llm" and cand.strategy_id == "p-test"
    assert cand.island_id == 2 and cand.generation == 7
    assert cand.parent_ids == (Candidate.make(task_id=relu_task.task_id, source=PARENT_SOURCE,
                                              backend="c").candidate_id,)
    assert cand.backend == "c" and cand.task_id == "19_ReLU"
    [rec] = records
    assert rec.outcome == "ok" and rec.final and rec.attempt == 1 and rec.status == 200
    assert rec.model == "scripted-model" and rec.prompt_tokens > 100 and rec.completion_tokens > 10
    assert rec.latency_s > 0 and rec.island_id == 2 and rec.prompt_id == "p-test"
    body = server.chat_requests()[0].body
    assert body["model"] == "scripted-model" and body["max_tokens"] == 1024
    assert "## Reference module" in body["messages"][1]["content"]


async def test_diff_reply_is_applied_to_parent(server, proposer, records, relu_task):
    server.push(ScriptedResponse.diff([("        y = torch.empty_like(x)\n",
                                         "        y = torch.zeros_like(x)\n")]))
    cand = await proposer.propose(_request(relu_task))
    assert "torch.zeros_like(x)" in cand.source and "torch.empty_like" not in cand.source
    assert cand.source.count("class ModelNew") == 1
    assert "edit(s) applied" in cand.note
    assert records[0].outcome == "ok"


async def test_diff_that_does_not_match_gives_stage0_candidate(server, proposer, relu_task):
    server.push(ScriptedResponse.diff([("this line is not in the parent", "x")]))
    cand = await proposer.propose(_request(relu_task))
    assert cand.source == "" and "not found in the parent" in cand.note


async def test_malformed_and_empty_replies_are_recorded_and_caller_keeps_going(
        server, proposer, records, relu_task):
    server.push(ScriptedResponse.malformed_json(), ScriptedResponse.empty(),
                ScriptedResponse.text("I would use shared memory here."),
                ScriptedResponse.full_file(PARENT_SOURCE))
    bad = await proposer.propose(_request(relu_task))
    empty = await proposer.propose(_request(relu_task))
    prose = await proposer.propose(_request(relu_task))
    good = await proposer.propose(_request(relu_task))
    assert bad.source == "" and "bad_response" in bad.note
    assert empty.source == "" and "empty" in empty.note
    assert prose.source == "" and "no code block" in prose.note
    assert good.source.strip() == PARENT_SOURCE.strip()
    assert [r.outcome for r in records] == ["bad_response", "empty", "ok", "ok"]
    assert len({bad.candidate_id, empty.candidate_id, prose.candidate_id}) == 3


async def test_429_honours_retry_after_then_succeeds(server, proposer, records, relu_task):
    server.push(ScriptedResponse.rate_limited(0.4), ScriptedResponse.full_file(PARENT_SOURCE))
    t0 = time.monotonic()
    cand = await proposer.propose(_request(relu_task))
    elapsed = time.monotonic() - t0
    assert cand.source  # the retry got the file
    assert elapsed >= 0.4, f"retried after {elapsed:.3f} s, before the server's retry-after"
    assert [(r.outcome, r.attempt, r.final) for r in records] == [
        ("rate_limited", 1, False), ("ok", 2, True)]
    assert records[0].retry_after_s == pytest.approx(0.4) and records[0].status == 429
    assert records[0].call_id == records[1].call_id


async def test_500s_are_retried_and_persistent_500s_give_stage0(server, proposer, records, relu_task):
    server.push(ScriptedResponse.server_error(500), ScriptedResponse.full_file(PARENT_SOURCE))
    ok = await proposer.propose(_request(relu_task))
    assert ok.source and [r.outcome for r in records] == ["server_error", "ok"]
    records.clear()
    server.push(*[ScriptedResponse.server_error(503)] * 3)  # 1 try + max_retries=2
    failed = await proposer.propose(_request(relu_task))
    assert failed.source == "" and "server_error after 3 attempt(s)" in failed.note
    assert [r.status for r in records] == [503, 503, 503] and records[-1].final
    server.push(ScriptedResponse.full_file(PARENT_SOURCE))  # and the caller keeps going
    assert (await proposer.propose(_request(relu_task))).source


async def test_timeout_is_retried(server, records, relu_task):
    proposer = LLMProposer(make_config(server, timeout_s=0.5), on_call=records.append)
    server.push(ScriptedResponse.delayed(3.0), ScriptedResponse.full_file(PARENT_SOURCE))
    t0 = time.monotonic()
    cand = await proposer.propose(_request(relu_task))
    assert time.monotonic() - t0 < 2.5
    assert cand.source
    assert [r.outcome for r in records] == ["timeout", "ok"]
    assert records[0].status is None and records[0].latency_s >= 0.45


async def test_slow_reply_within_timeout_succeeds(server, proposer, records, relu_task):
    server.push(ScriptedResponse.delayed(0.6, then=ScriptedResponse.full_file(PARENT_SOURCE)))
    cand = await proposer.propose(_request(relu_task))
    assert cand.source and records[0].outcome == "ok" and records[0].latency_s >= 0.6


async def test_huge_replies(server, proposer, records, relu_task):
    server.push(ScriptedResponse.huge(3_000_000, source=PARENT_SOURCE),
                ScriptedResponse.huge(3_000_000))
    with_code = await proposer.propose(_request(relu_task))
    without = await proposer.propose(_request(relu_task))
    assert with_code.source.strip() == PARENT_SOURCE.strip()
    assert without.source == "" and without.note
    assert records[0].completion_tokens > 500_000 and records[0].outcome == "ok"
    small = LLMProposer(make_config(server, max_source_chars=1000))
    server.push(ScriptedResponse.full_file(PARENT_SOURCE + "\n# pad\n" * 400))
    too_big = await small.propose(_request(relu_task))
    assert too_big.source == "" and "limit 1000" in too_big.note


async def test_translate_without_parent_uses_stand_in_default(server, proposer, relu_task):
    cand = await proposer.propose(_request(relu_task, mode="translate"))
    assert cand.parent_ids == () and "_lib.unary(x, y" in cand.source
    prompt = server.chat_requests()[0].prompt_text
    assert "SEARCH" not in prompt  # no parent: full files only


async def test_key_is_sent_but_never_in_prompts_records_or_notes(server, records, relu_task, monkeypatch):
    secret = "sk-test-SECRET-0123456789abcdef"
    monkeypatch.setenv("FOUNDRY_TEST_LLM_KEY", secret)
    task = relu_task.__class__(**{**relu_task.__dict__, "instructions": f"token {secret}"})
    proposer = LLMProposer(make_config(server), on_call=records.append)
    server.push(ScriptedResponse.server_error(500), ScriptedResponse.text(f"leak {secret} here"))
    cand = await proposer.propose(_request(task))
    req = server.chat_requests()[0]
    assert req.headers.get("authorization") == f"Bearer {secret}"
    assert secret not in req.prompt_text
    assert all(secret not in str(r.to_row()) for r in records)
    assert secret not in cand.note and secret not in str(cand.to_row())


async def test_keyless_server_gets_placeholder(server, proposer, relu_task, monkeypatch):
    monkeypatch.delenv("FOUNDRY_TEST_LLM_KEY", raising=False)
    server.push(ScriptedResponse.full_file(PARENT_SOURCE))
    await proposer.propose(_request(relu_task))
    assert server.chat_requests()[0].headers.get("authorization") == "Bearer no-key"


async def test_ensemble_picks_models_by_weight(server, records, relu_task):
    cfg = make_config(server, ensemble=[{"model": "big", "weight": 1.0},
                                        {"model": "small", "weight": 3.0}],
                      prices={"big": {"input": 10.0, "output": 30.0}})
    proposer = LLMProposer(cfg, on_call=records.append)
    for seed in range(24):
        req = _request(relu_task)
        req = req.__class__(**{**req.__dict__, "seed": seed})
        await proposer.propose(req)
    models = [r.model for r in records]
    assert {"big", "small"} == set(models)
    assert models.count("small") > models.count("big")
    assert all((r.cost_usd > 0) == (r.model == "big") for r in records)
    assert {b.body["model"] for b in server.chat_requests()} == {"big", "small"}


async def test_ensemble_members_on_different_servers(server, relu_task):
    from support.openai_server import ScriptedOpenAIServer
    with ScriptedOpenAIServer() as other:
        cfg = make_config(server, ensemble=[{"model": "here", "weight": 1.0},
                                            {"model": "there", "weight": 1.0,
                                             "base_url": other.base_url}])
        records = []
        proposer = LLMProposer(cfg, on_call=records.append)
        for seed in range(12):
            req = _request(relu_task)
            await proposer.propose(req.__class__(**{**req.__dict__, "seed": seed}))
        await proposer.aclose()
        assert {r.body["model"] for r in server.chat_requests()} == {"here"}
        assert {r.body["model"] for r in other.chat_requests()} == {"there"}
        assert {r.endpoint for r in records} == {f"http://127.0.0.1:{server.port}",
                                                 f"http://127.0.0.1:{other.port}"}
