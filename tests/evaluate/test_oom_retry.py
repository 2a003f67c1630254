"""The judge running out of device memory beside other lanes is not the candidate's fault:
the evaluation (or screen) is judged again once; any other judge error is not retried."""

from pathlib import Path

import pytest
import torch

from foundry.evaluate import EvalConfig, Evaluator
from foundry.evaluate.device_memory import WorkerOutOfMemory, judge_out_of_memory
from foundry.tasks.loader import load_task
from foundry.types import Candidate, EvalResult, Stage

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def relu_task():
    return load_task(str(ROOT / "benchmarks" / "smoke" / "relu.py"), profile="small")


def _judge(monkeypatch, errors):
    ev = Evaluator(config=EvalConfig.from_config({"device": "cpu"}))
    calls = []

    def fake_evaluate(task, cand, t0, phases, whole_device=False):
        calls.append((cand.candidate_id, whole_device))
        if errors:
            raise errors.pop(0)
        return EvalResult(candidate_id=cand.candidate_id, task_id=task.task_id, stage=int(Stage.CORRECT),
                          correct=True, runtime_ms=1.0)
    monkeypatch.setattr(ev, "_evaluate", fake_evaluate)
    return ev, calls


def test_the_judges_out_of_memory_is_judged_again_once(monkeypatch, relu_task):
    cand = Candidate.make(task_id=relu_task.task_id, source="# k", backend="c")
    ev, calls = _judge(monkeypatch, [torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 6.00 GiB")])
    try:
        result = ev.evaluate(task=relu_task, candidate=cand)
    finally:
        ev.close()
    assert result.correct and [whole for _, whole in calls] == [False, True]  # the second try: memory reserved whole
    assert "CUDA out of memory" in result.metrics["judge_out_of_memory_retried"]
    assert "device_memory_wait" in result.metrics["phases"]


def test_a_second_out_of_memory_or_another_error_fails_as_before(monkeypatch, relu_task):
    cand = Candidate.make(task_id=relu_task.task_id, source="# k", backend="c")
    ev, calls = _judge(monkeypatch, [torch.OutOfMemoryError("CUDA out of memory"), torch.OutOfMemoryError("CUDA out of memory")])
    try:
        twice = ev.evaluate(task=relu_task, candidate=cand)
        other_ev, other_calls = _judge(monkeypatch, [ValueError("a bug in the judge")])
        other = other_ev.evaluate(task=relu_task, candidate=cand)
        other_ev.close()
    finally:
        ev.close()
    assert not twice.correct and "evaluator_error" in twice.flags and len(calls) == 2
    assert not other.correct and "evaluator_error" in other.flags and len(other_calls) == 1
    assert "judge_out_of_memory_retried" not in other.metrics


def test_what_counts_as_the_judge_running_out_of_device_memory():
    assert judge_out_of_memory(torch.OutOfMemoryError("x"))
    assert judge_out_of_memory(WorkerOutOfMemory("the worker's"))
    assert judge_out_of_memory(RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert not judge_out_of_memory(MemoryError("host"))
    assert not judge_out_of_memory(ValueError("CUDA error: an illegal memory access"))


MODES = '''
import torch
import torch.nn as nn
from foundry.kernels import c
TUNABLE = {"MODE": [0, 1]}
SRC = r"""
#include <stdint.h>
void relu(const float* x, float* y, int64_t n) { for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0.f ? x[i] : 0.f; }
"""
lib = c.build(SRC)
class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        lib.relu(x.contiguous(), y, x.numel())
        return y
'''


def test_a_screen_is_retried_after_the_judges_out_of_memory_and_fails_its_points_on_other_errors(
        monkeypatch, relu_task):
    cand = Candidate.make(task_id=relu_task.task_id, source=MODES, backend="c")
    points = [{"MODE": 0}, {"MODE": 1}]
    ev = Evaluator(config=EvalConfig.from_config({"device": "cpu"}))
    real = ev._reference_outputs
    errors = [torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 6.00 GiB")]

    def flaky_references(*args, **kwargs):
        if errors:
            raise errors.pop(0)
        return real(*args, **kwargs)
    monkeypatch.setattr(ev, "_reference_outputs", flaky_references)
    try:
        retried = ev.screen(task=relu_task, candidate=cand, points=points)
        errors.append(ValueError("a bug in the judge"))
        failed = ev.screen(task=relu_task, candidate=cand, points=points)
    finally:
        ev.close()
    assert all(p.ok for p in retried), retried
    assert [p.ok for p in failed] == [False, False]
    assert all("the screen failed in the judge: ValueError: a bug in the judge" in p.error for p in failed)


OUT_OF_MEMORY = '''
import torch
import torch.nn as nn
from foundry.kernels import c
lib = c.build("void noop(void) {}")
class ModelNew(nn.Module):
    def forward(self, x):
        lib.noop()
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 6.00 GiB")
'''


def test_a_worker_that_runs_out_of_device_memory_is_tried_again_once_and_then_judged(relu_task):
    """Another lane's work may have taken the memory: the first out-of-memory in the worker
    gives no verdict, the second try (the device's memory reserved whole) does."""
    cand = Candidate.make(task_id=relu_task.task_id, source=OUT_OF_MEMORY, backend="c")
    with Evaluator(config=EvalConfig.from_config({"device": "cpu"})) as ev:
        result = ev.evaluate(task=relu_task, candidate=cand)
    assert not result.correct and "evaluator_error" not in result.flags
    assert result.stage == int(Stage.RUNTIME) and "CUDA out of memory" in result.error
    assert "CUDA out of memory" in result.metrics["judge_out_of_memory_retried"]


OUT_OF_MEMORY_WHEN_TIMED = '''
import torch
import torch.nn as nn
from foundry.kernels import c
lib = c.build("void noop(void) {}")
CALLS = [0]
class ModelNew(nn.Module):
    def forward(self, x):
        lib.noop()
        CALLS[0] += 1
        if CALLS[0] > 12:  # past the trials and the repeat: the timed runs
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 7.00 GiB")
        return torch.relu(x)
'''


def test_timed_runs_that_run_out_of_device_memory_are_tried_again_and_then_say_why(relu_task):
    """Every trial came back correct, then the timed runs ran out of device memory: the
    evaluation is tried again with the device reserved whole, and its verdict names the
    error (not only 'the worker exited with code 0')."""
    cand = Candidate.make(task_id=relu_task.task_id, source=OUT_OF_MEMORY_WHEN_TIMED, backend="c")
    with Evaluator(config=EvalConfig.from_config({"device": "cpu", "allow_torch_ops": True})) as ev:
        result = ev.evaluate(task=relu_task, candidate=cand)
    assert not result.correct and result.stage == int(Stage.RUNTIME), result.error
    assert "its timed runs failed: torch.OutOfMemoryError: CUDA out of memory" in result.error
    assert "CUDA out of memory" in result.metrics["judge_out_of_memory_retried"]
