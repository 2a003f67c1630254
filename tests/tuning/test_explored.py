"""Repeat tunings of a parameter space: fewer settings, the best seen kept, new ones drawn."""

import textwrap

import pytest

from actors.evaluation import tuner_config
from foundry.tasks import load_task
from foundry.templates.config import TemplateConfig
from foundry.tuning import Tuner, TunerConfig
from foundry.tuning.explored import ExploredPoints, SpaceKey
from foundry.types import Candidate, EvalResult, ScreenedPoint

TUNABLE = "TUNABLE = {'BLOCK': [64, 128, 256, 512], 'W': [1, 2, 4]}\n"  # 12 settings


def _task(tmp_path, name="t"):
    p = tmp_path / f"{name}.py"
    p.write_text(textwrap.dedent("""
        import torch
        import torch.nn as nn
        class Model(nn.Module):
            def forward(self, x):
                return torch.relu(x)
        def get_inputs():
            return [torch.randn(4, 64)]
        def get_init_inputs():
            return []
    """))
    return load_task(p)


def _runtime(params):  # fastest at BLOCK=256, W=1; BLOCK=512 fails
    return None if params["BLOCK"] == 512 else abs(params["BLOCK"] - 256) / 100 + params["W"]


class _Measure:
    def __init__(self):
        self.calls = []

    def __call__(self, cand):
        self.calls.append(dict(cand.params))
        ms = _runtime(cand.params)
        return EvalResult(candidate_id=cand.candidate_id, task_id=cand.task_id, stage=5 if ms else 4,
                          correct=ms is not None, runtime_ms=ms, speedup_eager=1.0 if ms else None)


def _key(params):
    return (params["BLOCK"], params["W"])


def test_a_repeat_tuning_measures_its_own_setting_the_best_seen_and_new_ones(tmp_path):
    task = _task(tmp_path)
    tuner = Tuner(config=TunerConfig(budget=6, seed=3))
    first = _Measure()
    tuner.tune(task=task, candidate=Candidate.make(task_id=task.task_id, source=TUNABLE + "# a", backend="c"),
               measure=first, device="cpu")
    assert len(first.calls) == 6
    best_seen = min((p for p in first.calls if _runtime(p)), key=_runtime)
    # a mutated child (other source, same space) that starts from its own params
    child = Candidate.make(task_id=task.task_id, source=TUNABLE + "# b", backend="c", params={"BLOCK": 128, "W": 4})
    again = _Measure()
    res = tuner.tune(task=task, candidate=child, measure=again, device="cpu")
    assert len(again.calls) == TunerConfig(budget=6).repeat_limit == 3
    assert again.calls[0] == {"BLOCK": 128, "W": 4} and again.calls[1] == best_seen
    assert _key(again.calls[2]) not in {_key(p) for p in first.calls}  # never measured before
    assert res.result.correct
    # a third tuning draws yet other settings
    third = _Measure()
    tuner.tune(task=task, candidate=Candidate.make(task_id=task.task_id, source=TUNABLE + "# c", backend="c"),
               measure=third, device="cpu")
    assert _key(third.calls[-1]) not in {_key(p) for p in first.calls + again.calls}


def test_another_task_or_device_gets_the_whole_budget_and_lanes_share_what_was_seen(tmp_path):
    task, other = _task(tmp_path, "t"), _task(tmp_path, "u")
    shared = ExploredPoints()
    lane_a = Tuner(config=TunerConfig(budget=6), explored=shared)
    lane_b = Tuner(config=TunerConfig(budget=6), explored=shared)
    lane_a.tune(task=task, candidate=Candidate.make(task_id=task.task_id, source=TUNABLE, backend="c"),
                measure=_Measure(), device="cuda")
    for tuner, t, device, expected in ((lane_b, other, "cuda", 6), (lane_b, task, "cpu", 6),
                                       (lane_b, task, "cuda", 3)):
        m = _Measure()
        tuner.tune(task=t, candidate=Candidate.make(task_id=t.task_id, source=TUNABLE + "# x", backend="c"),
                   measure=m, device=device)
        assert len(m.calls) == expected, (t.task_id, device)


def test_screened_settings_are_recorded_and_a_tuning_with_only_failures_does_not_count(tmp_path):
    task = _task(tmp_path)
    tuner = Tuner(config=TunerConfig(budget=4, seed=0))
    screened_sets = []

    def screen(cand, settings):
        screened_sets.append([dict(s) for s in settings])
        return [ScreenedPoint(dict(s), _runtime(s) is not None, _runtime(s), "" if _runtime(s) else "wrong")
                for s in settings]
    for note in ("a", "b"):
        cand = Candidate.make(task_id=task.task_id, source=TUNABLE + "# " + note, backend="c")
        tuner.tune(task=task, candidate=cand, measure=_Measure(), device="cpu", screen=screen)
    assert [len(s) for s in screened_sets] == [4, 2]
    key = SpaceKey.of(task_id=task.task_id, task_hash=task.source_hash, backend="c", device="cpu",
                      tunable={"BLOCK": [64, 128, 256, 512], "W": [1, 2, 4]})
    assert tuner.explored.screens(key) == 2
    # only failures: nothing kept, and the tuning does not count as a measured one
    before = tuner.explored.screens(key)
    tuner.explored.record(key, [({"BLOCK": 512, "W": 1}, None)])
    assert tuner.explored.screens(key) == before


def test_plan_fills_with_the_next_best_once_every_setting_was_measured():
    tunable = {"B": [1, 2, 3]}
    key = SpaceKey.of(task_id="t", task_hash="h", backend="c", device="cpu", tunable=tunable)
    explored = ExploredPoints()
    explored.record(key, [({"B": 1}, 3.0), ({"B": 2}, 1.0), ({"B": 3}, 2.0)])
    assert explored.plan(key, tunable=tunable, start={"B": 1}, limit=3, seed=0) == [{"B": 1}, {"B": 2}, {"B": 3}]
    assert explored.plan(key, tunable=tunable, start={"B": 1}, limit=2, seed=0) == [{"B": 1}, {"B": 2}]


def test_repeat_budget_config():
    assert TunerConfig(budget=16).repeat_limit == 8
    assert TunerConfig(budget=2).repeat_limit == 2
    assert TunerConfig(budget=1).repeat_limit == 1
    assert TunerConfig(budget=6, repeat_budget=10).repeat_limit == 6  # never above the budget
    with pytest.raises(ValueError, match="repeat_budget"):
        TunerConfig(repeat_budget=0)
    assert TemplateConfig(tune_repeat_budget=2).tuner_config().repeat_budget == 2
    assert tuner_config({"tune_budget": 6, "tune_repeat_budget": 3}) == {
        "budget": 6, "exhaustive_max": 32, "seed": 0, "cache_path": None, "repeat_budget": 3,
        "tune_uncovered": False}
    with pytest.raises(Exception, match="tune_repat_budget"):
        tuner_config({"tune_repat_budget": 3})
