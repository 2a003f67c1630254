"""The differential check's parts: a spec that redraws one input (the same inputs on
every path that generates them), paired trials in the job plan and the job, and the
rule on the outputs (`input_ignored`)."""

from __future__ import annotations

import json

import pytest
import torch

from foundry.evaluate.config import EvalConfig
from foundry.evaluate.input_use import MAX_DEVIATION, change_check
from foundry.evaluate.job import CandidateSpec, Job, JobError, TaskSpec, TrialSpec
from foundry.evaluate.job_plan import paired_trial, timing_spec, trials_for
from foundry.evaluate.trial_inputs import generate_on, make_trial_inputs, trial_input_spec
from foundry.evaluate.verdict import Findings, check_input_use
from foundry.tasks.inputs import InputSpec, make_inputs
from foundry.types import Task


class _Module:  # a task module: two random inputs and a fixed one
    @staticmethod
    def get_inputs():
        return [torch.randn(4, 3), torch.randint(0, 5, (7,)), 2.5]


# ------------------------------------------------------------------ inputs
@pytest.mark.parametrize("distribution", ["standard", "heavy"])
def test_a_redraw_takes_one_input_from_the_other_seed(distribution):
    own, other = make_inputs(_Module, InputSpec(5, distribution)), make_inputs(_Module, InputSpec(9, distribution))
    for i in (0, 1):
        got = make_inputs(_Module, InputSpec(5, distribution, redraw=i, redraw_seed=9))
        assert torch.equal(got[i], other[i]) and torch.equal(got[1 - i], own[1 - i]) and got[2] == 2.5
        again = make_inputs(_Module, InputSpec(5, distribution, redraw=i, redraw_seed=9))
        assert all(torch.equal(a, b) for a, b in zip(got[:2], again[:2]))  # reproducible
        # the device path (any device: the CPU here) applies it the same way
        dev = generate_on(_Module, InputSpec(5, distribution, redraw=i, redraw_seed=9), torch.device("cpu"))
        plain = generate_on(_Module, InputSpec(5, distribution), torch.device("cpu"))
        donor = generate_on(_Module, InputSpec(9, distribution), torch.device("cpu"))
        assert torch.equal(dev[i], donor[i]) and torch.equal(dev[1 - i], plain[1 - i])


def test_a_redraw_is_an_input_index():
    with pytest.raises(ValueError, match="redraw must be an input index"):
        InputSpec(1, redraw=-1)
    with pytest.raises(IndexError, match="input 5 is redrawn"):
        make_inputs(_Module, InputSpec(1, redraw=5, redraw_seed=2))


def test_the_worker_and_the_reference_read_a_trial_alike():
    t = TrialSpec(11, "standard", 0, redraw=1, redraw_seed=13)
    assert trial_input_spec(t) == InputSpec(11, "standard", 1, 13)
    assert trial_input_spec(TrialSpec(11, "heavy")) == InputSpec(11, "heavy")
    a = make_trial_inputs(_Module, trial_input_spec(t), "cpu")
    assert torch.equal(a[1], make_inputs(_Module, InputSpec(13))[1])


# ------------------------------------------------------------------ the plan and the job
def _task() -> Task:
    return Task(task_id="t", path="/t.py", source="x = 1")


def test_paired_trials_follow_the_others_and_are_not_timed():
    cfg = EvalConfig(trials=5)
    plain = trials_for(_task(), cfg, large=False, base=3)
    assert trials_for(_task(), cfg, large=False, base=3, redraw=()) == plain  # no differential inputs
    paired = trials_for(_task(), cfg, large=False, base=3, redraw=(1, 0))
    assert paired[:len(plain)] == plain
    extra = paired[len(plain):]
    assert [t.redraw for t in extra] == [1, 0] and extra[0] == paired_trial(plain[0], 1)
    assert all((t.seed, t.distribution, t.variant) == (plain[0].seed, plain[0].distribution, 0) for t in extra)
    assert len({t.redraw_seed for t in extra} | {t.seed for t in plain}) == len(plain) + 2
    assert timing_spec(cfg, paired).sets == timing_spec(cfg, plain).sets
    job = Job(kind="candidate", device="cpu", threads=1, task=TaskSpec("t", "/t.py", "x = 1"), variants=({},),
              init_seed=1, trials=paired, timing=timing_spec(cfg, paired),
              candidate=CandidateSpec(source="x", backend="c"))
    assert job.main_trials == list(range(len(plain)))
    assert job.paired_trials == [len(plain), len(plain) + 1] and job.base_of(len(plain)) == 0
    assert Job.from_json(job.to_json()) == job
    raw = json.loads(job.to_json())
    raw["trials"].append({"seed": 999, "distribution": "standard", "variant": 0, "redraw": 0, "redraw_seed": 1})
    with pytest.raises(JobError, match="no trial with its seed"):
        Job.from_json(json.dumps(raw))


# ------------------------------------------------------------------ the rule
def test_the_rule_on_two_trials_outputs():
    gen = torch.Generator().manual_seed(3)
    r0 = torch.randn(1000, generator=gen)
    r1 = r0 + 1e-3 * torch.randn(1000, generator=gen)  # the redrawn input moves it a little
    ignoring = change_check(r0, r1, r0.clone(), r0.clone())
    assert not ignoring.ok and ignoring.cand_change == 0.0
    assert ignoring.error == pytest.approx(ignoring.ref_change) and 0.5e-3 < ignoring.ref_change < 2e-3
    noise = 1e-5 * torch.randn(1000, generator=gen)  # an honest kernel's rounding
    honest = change_check(r0, r1, r0 + noise, r1 - noise)
    assert honest.ok and honest.error < 0.1 * honest.ref_change
    half = change_check(r0, r1, r0, r0 + (1 - 0.6) * (r1 - r0))  # follows 40% of the change
    assert not half.ok and half.error == pytest.approx(0.6 * half.ref_change, rel=1e-6)
    assert change_check(r0, r1, r0, r0 + 0.6 * (r1 - r0)).ok  # 0.4 < MAX_DEVIATION
    assert MAX_DEVIATION == 0.5
    # output trees, scalars and NaN where the reference has them
    t0, t1 = (torch.tensor(2.0), [r0, 1.0]), (torch.tensor(2.001), [r1, 1.0])
    assert not change_check(t0, t1, t0, t0).ok and change_check(t0, t1, t0, t1).ok
    n0, n1 = r0.clone(), r1.clone()
    n0[3] = n1[3] = float("nan")
    assert change_check(n0, n1, n0, n1).ok
    assert change_check(r0, r1, r0[:5], r1[:5]) is None  # wrong shape: the comparison says so
    assert change_check(r0, r1, (r0,), (r1,)) is None


def test_the_guard_names_the_input():
    refs = {0: torch.tensor(8.30), 1: torch.tensor(8.31), 2: torch.tensor(8.301)}
    plan = (TrialSpec(1, "standard"), TrialSpec(2, "heavy"), TrialSpec(1, "standard", 0, redraw=1, redraw_seed=5))
    f = Findings(candidate_outputs={0: torch.tensor(8.30), 1: torch.tensor(8.31), 2: torch.tensor(8.30)})
    check_input_use(f, refs, plan, [(2, 0)])
    assert f.flags == ["input_ignored"] and "input 1 redrawn (trial 2 against trial 0)" in f.errors[0]
    ok = Findings(candidate_outputs={0: torch.tensor(8.30), 1: torch.tensor(8.31), 2: torch.tensor(8.301)})
    check_input_use(ok, refs, plan, [(2, 0)])
    assert ok.flags == []
    missing = Findings(candidate_outputs={0: torch.tensor(8.30)})  # the trial failed: reported elsewhere
    check_input_use(missing, refs, plan, [(2, 0)])
    assert missing.flags == []
