"""A heavy-tailed trial whose float32 reference is off by more than the tolerance (the
task's rounding depends on its inputs' magnitude): a kernel that computes the function
more exactly passes against the model computed in float64; a kernel wrong there still
fails, with what both references said; a kernel wrong on the standard trials costs no
float64 reference."""

from __future__ import annotations

from pathlib import Path

import pytest

from foundry.evaluate import EvalConfig, Evaluator
from foundry.tasks import load_task
from foundry.types import Candidate, Stage

# (x * 1000 + 0.1) - x * 1000 is 0.1; in float32 it is 0.1 up to half an ulp of x * 1000:
# 3e-5 at most for the standard inputs in [0, 1), within the tolerance; 0.02 where the
# heavy-tailed trial makes x several hundred, outside it (every heavy-tailed draw misses)
TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return ((x * 1000.0 + 0.1) - x * 1000.0) * x


def get_inputs():
    return [torch.rand(64, 256)]


def get_init_inputs():
    return []
'''

# the honest ReLU candidate, its loop body replaced by each kernel's
HONEST = (Path(__file__).resolve().parents[1] / "exploits" / "candidates" / "honest_relu_c.py").read_text()
RELU_BODY = "y[i] = x[i] > 0.f ? x[i] : 0.f;"

EXACT = "double v = x[i]; y[i] = (float)(((v * 1000.0 + 0.1) - v * 1000.0) * v);"
# right where x < 1 (every standard input), 1% off above it (the heavy-tailed trial's large inputs)
OFF_WHEN_LARGE = ("double v = x[i]; double e = ((v * 1000.0 + 0.1) - v * 1000.0) * v; "
                  "y[i] = (float)(v < 1.0 ? e : e * 1.01);")
DOUBLED = "y[i] = 2.f * x[i];"


@pytest.fixture(scope="module")
def ev(tmp_path_factory):
    e = Evaluator(config=EvalConfig.from_config({
        "trials": 4, "timeout_s": 30, "compile_baseline": False, "timing_min_ms": 20,
        "baseline_cache_dir": str(tmp_path_factory.mktemp("baselines"))}))
    yield e
    e.close()


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    path = tmp_path_factory.mktemp("tasks") / "cancellation.py"
    path.write_text(TASK)
    return load_task(path)


def judge(ev, task, body: str):
    assert RELU_BODY in HONEST
    source = HONEST.replace(RELU_BODY, "{ " + body + " }")
    return ev.evaluate(task=task, candidate=Candidate.make(task_id=task.task_id, source=source, backend="c"))


@pytest.fixture
def precise_calls(ev, monkeypatch):
    calls = []
    real = ev._reference.precise_output

    def counted(task, job, i, like, *, scale=1.0):
        calls.append((job.trials[i].distribution, scale))
        return real(task, job, i, like, scale=scale)

    monkeypatch.setattr(ev._reference, "precise_output", counted)
    return calls


def test_a_kernel_exact_where_the_float32_reference_is_not_passes_against_float64(ev, task, precise_calls):
    r = judge(ev, task, EXACT)
    assert r.correct, r.error
    assert r.metrics["float64_reference_trials"], r.metrics
    assert precise_calls and {d for d, _ in precise_calls} == {"heavy"}  # the standard trials passed as they were


def test_a_kernel_wrong_on_large_inputs_fails_against_both_references(ev, task, precise_calls):
    r = judge(ev, task, OFF_WHEN_LARGE)
    assert not r.correct and r.stage == Stage.VALUE
    assert "heavy" in r.error and "against the model computed in float64" in r.error
    # and how far the float32 reference itself is from the float64 one: further than this 1%-wrong
    # kernel (about 1.2 against 0.2), which is why a kernel is not passed for being "within K
    # times the float32 reference's own error": a wrong kernel would hide under it
    own = float(r.error.split("the float32 reference's own max abs error against it ")[1].split(")")[0])
    candidate = float(r.error.split("against the model computed in float64: output: max abs error ")[1].split(",")[0])
    assert own > candidate > 0.0002, r.error
    assert "float64_reference_trials" not in r.metrics


def test_a_kernel_wrong_on_standard_inputs_costs_no_float64_reference(ev, task, precise_calls):
    r = judge(ev, task, DOUBLED)
    assert not r.correct and r.stage == Stage.VALUE
    assert precise_calls == []


def test_a_model_that_does_not_run_in_float64_leaves_the_float32_verdict(ev, tmp_path, precise_calls):
    """The same task with a float32 matrix made in its forward: in float64 its product
    raises, so there is no float64 reference and the heavy-tailed miss stands."""
    path = tmp_path / "cancellation_float32_only.py"
    path.write_text(TASK.replace("        return ((x * 1000.0 + 0.1) - x * 1000.0) * x\n",
                                 "        y = ((x * 1000.0 + 0.1) - x * 1000.0) * x\n"
                                 "        return y @ torch.eye(256, dtype=torch.float32)\n"))
    task = load_task(path)
    r = judge(ev, task, EXACT)
    assert not r.correct and r.stage == Stage.VALUE and "heavy" in r.error
    assert precise_calls and "float64" not in r.error  # asked for, none made: the float32 verdict as it was
