"""Mutations, template state, fusion boundaries and the proposer's three modes."""

import random
from pathlib import Path

import pytest

from tests.templates.helpers import assert_close, make_task, run_candidate

from foundry.templates import TemplateConfig, TemplateProposer
from foundry.templates.engine import describe_task
from foundry.templates.mutate import TemplateState, mutate, read_state, split_epilogues, splittable
from foundry.tuning.space import read_tunable
from foundry.types import Candidate, EvalResult, ProposalRequest

ROOT = Path(__file__).resolve().parents[2]

SOFTMAX_POST = dict(forward="return torch.tanh(torch.softmax(xs[0] + 1.0, dim=-1) * 4.0)",
                    inputs="[torch.randn(5, 40)]")


@pytest.fixture
def task(tmp_path):
    return make_task(tmp_path, "sm_post", **SOFTMAX_POST)


def test_state_marker_roundtrip():
    st = TemplateState(backend="c", variant="fused", unfused=(0, 2))
    assert read_state("x = 1\n" + st.marker() + "\nmore") == st
    assert read_state("no marker here") is None


@pytest.mark.parametrize("backend", ["c", "triton"])
def test_split_epilogue_moves_the_boundary_and_stays_correct(task, backend, monkeypatch):
    if backend == "triton":
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    desc = describe_task(task)
    assert splittable(desc) == (0,)
    split = split_epilogues(desc, (0,))
    assert [r.name for r in split.regions] == ["_k0", "_k0_post"]
    assert split.regions[0].post is None and split.regions[1].row is None
    assert "self._k0_post(self._k0(" in split.forward_src
    ref, got = run_candidate(task, backend=backend, unfused=(0,), params={"BLOCK": 16} if backend == "triton" else None)
    assert_close(ref, got)


def test_mutations_change_exactly_one_thing(task):
    desc = describe_task(task)
    st = TemplateState(backend="c")
    tunable = {"BLOCK": [1, 2, 3], "SIMD": [0, 8]}
    seen = set()
    for seed in range(40):
        m = mutate(state=st, params={}, tunable=tunable, desc=desc, variants=("fused",),
                   allowed=("params", "template", "fusion"), rng=random.Random(seed))
        kind = m.what.split(":")[0]
        seen.add(kind)
        if kind == "params":
            assert m.state == st and len(m.params) == 1
            (k, v), = m.params.items()
            assert v != tunable[k][0]
        else:
            assert m.state.unfused == (0,) and m.params == {}
    assert seen == {"params", "fusion"}  # only one template applies on the c backend


def test_only_allowed_mutations(task):
    desc = describe_task(task)
    for seed in range(10):
        m = mutate(state=TemplateState(backend="triton"), params={}, tunable={"BLOCK": [1, 2]}, desc=desc,
                   variants=("fused",), allowed=("fusion",), rng=random.Random(seed))
        assert m.what.startswith("fusion")


async def test_proposer_translate_optimize_repair(task):
    p = TemplateProposer()
    first = await p.propose(ProposalRequest(task=task, backend="c", mode="translate", seed=1))
    assert first.origin == "template" and first.source and read_state(first.source).backend == "c"
    assert read_tunable(first.source)
    child = await p.propose(ProposalRequest(task=task, backend="c", mode="optimize", parent=first, seed=1,
                                            generation=3))
    assert child.parent_ids == (first.candidate_id,)
    assert child.candidate_id != first.candidate_id
    assert child.note.split(":")[0] in ("params", "fusion")
    failed = EvalResult(candidate_id=child.candidate_id, task_id=task.task_id, stage=2, correct=False, error="boom")
    fixed = await p.propose(ProposalRequest(task=task, backend="c", mode="repair", parent=child,
                                            parent_result=failed, seed=2))
    assert fixed.source and fixed.candidate_id != child.candidate_id
    assert fixed.note.startswith("repair")


async def test_proposer_says_when_no_template_applies(tmp_path):
    t = make_task(tmp_path, "mm", forward="return xs[0] @ xs[1]", inputs="[torch.randn(4, 4), torch.randn(4, 4)]")
    c = await TemplateProposer().propose(ProposalRequest(task=t, backend="c", mode="translate"))
    assert c.source == "" and c.note.startswith("no template applies; needs an LLM")
    c = await TemplateProposer().propose(ProposalRequest(task=t, backend="cuda", mode="translate"))
    assert c.source == "" and "needs an LLM" in c.note


async def test_disabled_families_are_not_covered(task):
    p = TemplateProposer(config=TemplateConfig(families=("pointwise", "reduce")))
    c = await p.propose(ProposalRequest(task=task, backend="c", mode="translate"))
    assert c.source == "" and "softmax" in c.note


@pytest.mark.parametrize("forward,family", [("return F.max_pool2d(torch.relu(xs[0]), 2)", "pool"),
                                            ("return torch.cumsum(xs[0], dim=1)", "scan"),
                                            ("return torch.softmax(xs[0], dim=-1)", "softmax"),
                                            ("return F.cross_entropy(xs[0].flatten(1), xs[0].flatten(1).argmax(1))",
                                             "loss")])
async def test_the_default_config_proposes_for_every_family_the_emitters_know(tmp_path, forward, family):
    import yaml
    shipped = yaml.safe_load((ROOT / "conf" / "templates" / "default.yaml").read_text())
    task = make_task(tmp_path, family, forward=forward, inputs="[torch.randn(2, 3, 6, 7)]")
    assert family in describe_task(task).families
    for config in (TemplateConfig(), TemplateConfig.from_config(shipped)):  # the main job's default is the YAML's
        c = await TemplateProposer(config=config).propose(ProposalRequest(task=task, backend="c", mode="translate"))
        assert c.source and c.origin == "template", c.note


async def test_optimize_a_non_template_parent_starts_from_a_template(task):
    llm = Candidate.make(task_id=task.task_id, source="class ModelNew: pass", backend="c", origin="llm")
    c = await TemplateProposer().propose(ProposalRequest(task=task, backend="c", mode="optimize", parent=llm))
    assert c.source and c.parent_ids == (llm.candidate_id,)


def test_config_rejects_unknown_keys_and_values():
    with pytest.raises(ValueError, match=r"unknown key 'templates\.bogus'; allowed: enabled, families"):
        TemplateConfig.from_config({"bogus": 1})
    with pytest.raises(ValueError, match="unknown family 'attention'"):
        TemplateConfig.from_config({"families": ["attention"]})
    cfg = TemplateConfig.from_config({"tune_budget": 4})
    assert cfg.tuner_config().budget == 4


def test_islands_translate_from_different_templates_the_fastest_first(tmp_path):
    """A float32 Linear with an epilogue: island 0 starts from the matmul-with-epilogue
    template, island 1 from the Linear-kernels one, island 2 from `fused`, island 3 wraps;
    on the c backend island 0 from `fused`, island 1 from the C Linear kernel's."""
    t = make_task(tmp_path, "mm", forward="return torch.relu(self.l(x)) + 1.0", sig="x",
                  init="self.l = nn.Linear(33, 20)", inputs="[torch.randn(5, 33)]")
    firsts = [TemplateProposer().propose_sync(ProposalRequest(task=t, backend="triton", mode="translate",
                                                              island_id=i)) for i in range(4)]
    assert [read_state(c.source).variant for c in firsts] == ["matmul", "linear", "fused", "matmul"]
    assert all(c.strategy_id == f"template:{read_state(c.source).variant}" for c in firsts)
    c_firsts = [TemplateProposer().propose_sync(ProposalRequest(task=t, backend="c", mode="translate", island_id=i))
                for i in range(2)]
    assert [read_state(c.source).variant for c in c_firsts] == ["fused", "linear"]
