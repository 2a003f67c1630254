"""The tuner: space walking, best selection, every timing recorded, the JSON cache."""

import json
import textwrap

import pytest

from foundry.tasks import load_task
from foundry.templates.engine import emit
from foundry.tuning import Tuner, TunerConfig
from foundry.tuning.inprocess import InProcessMeasure
from foundry.tuning.space import SpaceError, points, read_tunable, size
from foundry.types import Candidate, EvalResult


def test_exhaustive_when_small_sampled_when_large():
    small = {"A": [1, 2], "B": ["x", "y", "z"]}
    pts = list(points(small, limit=100, exhaustive_max=32, seed=0))
    assert len(pts) == 6 and pts[0] == {"A": 1, "B": "x"}
    assert len({tuple(sorted(p.items())) for p in pts}) == 6
    big = {f"P{i}": list(range(4)) for i in range(6)}  # 4096 points
    a = list(points(big, limit=10, exhaustive_max=32, seed=5))
    b = list(points(big, limit=10, exhaustive_max=32, seed=5))
    c = list(points(big, limit=10, exhaustive_max=32, seed=6))
    assert a == b and a != c and len(a) == 10 and size(big) == 4096
    assert a[0] == {k: 0 for k in big}


def test_read_tunable():
    assert read_tunable("TUNABLE = {'B': [1, 2]}\nPARAMS = {}") == {"B": [1, 2]}
    assert read_tunable("x = 1") == {}
    with pytest.raises(SpaceError):
        read_tunable("TUNABLE = {'B': []}")
    with pytest.raises(SpaceError):
        read_tunable("TUNABLE = make()")


SRC = "TUNABLE = {'BLOCK': [64, 128, 256, 512], 'W': [1, 2]}\nPARAMS = {'BLOCK': 64, 'W': 1}\n"


class _Latency:
    """A measurement whose runtime follows the params (a test double for selection logic);
    BLOCK=512 is incorrect."""

    def __init__(self):
        self.calls = []

    def __call__(self, cand):
        self.calls.append(dict(cand.params))
        b, w = cand.params["BLOCK"], cand.params["W"]
        ok = b != 512
        return EvalResult(candidate_id=cand.candidate_id, task_id=cand.task_id, stage=5 if ok else 4, correct=ok,
                          runtime_ms=abs(b - 256) / 100 + w if ok else None, speedup_eager=1.0 if ok else None,
                          error="" if ok else "wrong values")


def _task(tmp_path):
    p = tmp_path / "t.py"
    p.write_text(textwrap.dedent("""
        import torch
        import torch.nn as nn
        class Model(nn.Module):
            def forward(self, x):
                return torch.relu(x) * 2.0
        N = 2048
        def get_inputs():
            return [torch.randn(4, N)]
        def get_init_inputs():
            return []
    """))
    return load_task(p)


def test_best_correct_setting_wins_and_every_timing_is_recorded(tmp_path):
    task = _task(tmp_path)
    cand = Candidate.make(task_id=task.task_id, source=SRC, backend="c")
    m = _Latency()
    res = Tuner(config=TunerConfig(budget=16)).tune(task=task, candidate=cand, measure=m, device="cpu:1")
    assert len(m.calls) == 8 and len(res.records) == 8
    assert res.candidate.params == {"BLOCK": 256, "W": 1}
    assert res.result.correct and res.result.metrics["tuning_status"] == "tuned"
    rows = res.result.metrics["tuning"]
    assert len(rows) == 8 and sum(not r["correct"] for r in rows) == 2


def test_budget_limits_measurements(tmp_path):
    task = _task(tmp_path)
    cand = Candidate.make(task_id=task.task_id, source=SRC, backend="c")
    m = _Latency()
    res = Tuner(config=TunerConfig(budget=3, exhaustive_max=2, seed=1)).tune(task=task, candidate=cand,
                                                                            measure=m, device="cpu")
    assert len(m.calls) == 3 and m.calls[0] == {"BLOCK": 64, "W": 1}
    assert res.result.correct


def test_cache_per_shape_and_device(tmp_path):
    task = _task(tmp_path)
    cache = tmp_path / "cache" / "tuning.json"
    cand = Candidate.make(task_id=task.task_id, source=SRC, backend="c")
    tuner = Tuner(config=TunerConfig(cache_path=str(cache)))
    first = tuner.tune(task=task, candidate=cand, measure=_Latency(), device="cpu:1")
    assert not first.from_cache
    data = json.loads(cache.read_text())
    assert len(data) == 1 and next(iter(data.values()))["params"] == {"BLOCK": 256, "W": 1}
    m = _Latency()
    again = Tuner(config=TunerConfig(cache_path=str(cache))).tune(task=task, candidate=cand, measure=m,
                                                                  device="cpu:1")
    assert again.from_cache and len(m.calls) == 1 and again.candidate.params == {"BLOCK": 256, "W": 1}
    m2 = _Latency()
    other = tuner.tune(task=task, candidate=cand, measure=m2, device="cuda:H200")
    assert not other.from_cache and len(m2.calls) == 8
    assert len(json.loads(cache.read_text())) == 2
    assert not list(cache.parent.glob(".tuning-*"))  # no temp files left behind


def test_no_correct_setting_keeps_the_candidate(tmp_path):
    task = _task(tmp_path)
    cand = Candidate.make(task_id=task.task_id, source="TUNABLE = {'BLOCK': [512]}\n", backend="c",
                          params={"W": 1})

    def measure(c):
        return EvalResult(candidate_id=c.candidate_id, task_id=c.task_id, stage=2, correct=False, error="crash")
    res = Tuner().tune(task=task, candidate=cand, measure=measure, device="cpu")
    assert res.candidate is cand and not res.result.correct
    assert res.result.metrics["tuning_status"] == "no correct setting"


def test_real_cpu_tuning_of_a_c_template(tmp_path):
    task = _task(tmp_path)
    src = emit(task, backend="c")
    cand = Candidate.make(task_id=task.task_id, source=src, backend="c", origin="template")
    res = Tuner(config=TunerConfig(budget=3, seed=0)).tune(task=task, candidate=cand,
                                                          measure=InProcessMeasure(task=task, rounds=2),
                                                          device="cpu")
    assert res.result.correct and res.result.runtime_ms > 0 and res.result.eager_ms > 0
    assert len(res.records) == 3 and all(r.correct for r in res.records)
    tun = read_tunable(src)
    assert all(res.candidate.params[k] in tun[k] for k in res.candidate.params)
