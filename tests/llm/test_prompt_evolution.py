"""Prompt evolution: selection, aggregated records, LLM edit steps over real HTTP."""

from __future__ import annotations

import collections
import random

import pytest

from foundry.llm import (LLMClient, PromptEvolutionConfig, PromptPopulation, PromptVariant)
from foundry.llm.prompt_evolution import builtin_variants
from support.openai_server import ScriptedResponse

from llm_helpers import make_config


def _pop(**cfg) -> PromptPopulation:
    return PromptPopulation(PromptEvolutionConfig(**cfg))


def test_builtin_variants_are_distinct_and_complete():
    vs = builtin_variants()
    assert len(vs) >= 4 and len({v.prompt_id for v in vs}) == len(vs)
    assert all(set(v.sections) == {"philosophy", "strategies", "pitfalls", "analysis"} for v in vs)


@pytest.mark.parametrize("selection", ["ucb", "softmax"])
def test_selection_favours_the_prompt_that_improves(selection):
    pop = _pop(selection=selection, edit_every=0, temperature=0.1)
    good = pop.active[2].prompt_id
    rng = random.Random(0)
    counts = collections.Counter()
    for i in range(400):
        v = pop.select(rng)
        counts[v.prompt_id] += 1
        pop.report(prompt_id=v.prompt_id, island_id=i % 3, improved=v.prompt_id == good,
                   fitness_delta=0.5 if v.prompt_id == good else -0.1, correct=True)
    assert counts.most_common(1)[0][0] == good and counts[good] > 200
    assert all(counts[v.prompt_id] > 0 for v in pop.active)  # every prompt was tried
    best = pop.stats()[0]
    assert best.prompt_id == good and best.islands == 3 and best.mean_fitness_delta == pytest.approx(0.5)


def test_ucb_tries_every_prompt_first():
    pop = _pop(selection="ucb")
    rng = random.Random(1)
    first = [pop.select(rng).prompt_id for _ in range(len(pop.active))]
    assert sorted(first) == sorted(v.prompt_id for v in pop.active)


def test_records_aggregate_across_islands_and_unknown_ids_are_counted():
    pop = _pop(edit_every=3)
    pid = pop.active[0].prompt_id
    for island in (0, 1, 1):
        assert pop.report(prompt_id=pid, island_id=island, improved=island == 0,
                          fitness_delta=1.0, correct=False)
    assert not pop.report(prompt_id="p-gone", island_id=0, improved=True, fitness_delta=1.0,
                          correct=True)
    s = pop.stats_for(pid)
    assert (s.reports, s.improved, s.correct, s.islands) == (3, 1, 0, 2)
    assert pop.unknown_reports == 1 and pop.edit_due


async def test_without_llm_evolve_skips_and_selection_still_runs():
    pop = _pop(edit_every=2)
    rng = random.Random(0)
    for _ in range(2):
        v = pop.select(rng)
        pop.report(prompt_id=v.prompt_id, island_id=0, improved=False, fitness_delta=0, correct=False)
    assert pop.edit_due
    out = await pop.evolve(client=None, rng=rng)
    assert out.status == "skipped" and not pop.edit_due and len(pop.active) == 4


async def test_llm_edit_adds_a_child_prompt(server):
    records = []
    client = LLMClient(make_config(server), on_call=records.append)
    pop = _pop(edit_every=1)
    out = await pop.evolve(client=client, rng=random.Random(3), context="backend c; tasks: 19_ReLU")
    assert out.status == "accepted", out
    assert out.strategy in ("improve", "specialise", "generalise", "simplify", "elaborate")
    child = pop.variant(out.prompt_id)
    parent = pop.variant(out.parent_id)
    assert child.origin == "llm_edit" and child.edited_section == out.section
    assert child.sections[out.section] != parent.sections[out.section]
    assert "Revision" in child.sections[out.section]  # the stand-in's edit
    assert {k: v for k, v in child.sections.items() if k != out.section} == \
        {k: v for k, v in parent.sections.items() if k != out.section}
    assert len(pop.active) == 5 and records[0].purpose == "prompt_edit"
    prompt = server.chat_requests()[0].prompt_text
    assert f"Strategy: **{out.strategy}**" in prompt and f"Edit the `{out.section}` section" in prompt
    assert "Context of the search: backend c; tasks: 19_ReLU" in prompt


async def test_duplicate_invalid_and_failed_edits(server):
    client = LLMClient(make_config(server, max_retries=0))
    a = PromptVariant.make({"philosophy": "A.", "pitfalls": "B."})
    b = PromptVariant.make({"philosophy": "C.", "pitfalls": "B."})
    pop = PromptPopulation(PromptEvolutionConfig(max_section_chars=200), variants=[a, b])
    rng = random.Random(5)

    async def edit(reply, parent):
        server.push(reply)
        return await pop.evolve(client=client, rng=rng, parent_id=parent.prompt_id,
                                section="philosophy", strategy="simplify")

    dup = await edit(ScriptedResponse.text("```text\nC.\n```"), a)  # a edited == b
    assert dup.status == "duplicate" and dup.prompt_id == b.prompt_id
    same = await edit(ScriptedResponse.text("```text\nA.\n```"), a)
    assert same.status == "invalid" and "identical" in same.detail
    big = await edit(ScriptedResponse.text("```text\n" + "x" * 500 + "\n```"), a)
    assert big.status == "invalid" and "limit 200" in big.detail
    empty = await edit(ScriptedResponse.empty(), a)
    assert empty.status == "failed" and "empty" in empty.detail
    err = await edit(ScriptedResponse.server_error(500), a)
    assert err.status == "failed" and "server_error" in err.detail
    ok = await edit(ScriptedResponse.text("## philosophy\nBe careful.\n"), b)  # no fence
    assert ok.status == "accepted" and pop.variant(ok.prompt_id).sections == {
        "philosophy": "Be careful.", "pitfalls": "B."}
    assert [e.status for e in pop.edits] == ["duplicate", "invalid", "invalid", "failed",
                                             "failed", "accepted"]
    assert len(pop.active) == 3


async def test_budget_ends_edits_cleanly(server):
    client = LLMClient(make_config(server, budget={"max_calls": 1}))
    pop = _pop()
    assert (await pop.evolve(client=client, rng=random.Random(0))).status == "accepted"
    out = await pop.evolve(client=client, rng=random.Random(0))
    assert out.status == "budget" and "max_calls" in out.detail


async def test_population_cap_retires_the_worst_used_prompt(server):
    client = LLMClient(make_config(server))
    pop = _pop(max_population=4, min_uses_to_retire=2)
    worst = pop.active[1].prompt_id
    for v in pop.active:
        for _ in range(3):
            pop.report(prompt_id=v.prompt_id, island_id=0, improved=v.prompt_id != worst,
                       fitness_delta=0.0, correct=True)
    out = await pop.evolve(client=client, rng=random.Random(2))
    assert out.status == "accepted"
    ids = [v.prompt_id for v in pop.active]
    assert worst not in ids and out.prompt_id in ids and len(ids) == 4
    assert pop.report(prompt_id=worst, island_id=0, improved=False, fitness_delta=0, correct=False)


def test_state_round_trip():
    pop = _pop(selection="softmax")
    rng = random.Random(0)
    for _ in range(10):
        v = pop.select(rng)
        pop.report(prompt_id=v.prompt_id, island_id=1, improved=True, fitness_delta=0.3, correct=True)
    state = pop.to_state()
    import json
    back = PromptPopulation.from_state(json.loads(json.dumps(state)), pop.config)
    assert back.stats() == pop.stats() and back.reports_since_edit == pop.reports_since_edit
    assert back.select(random.Random(9)).prompt_id == pop.select(random.Random(9)).prompt_id
