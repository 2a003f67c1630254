"""A screen of Triton points on a real GPU: every point built and checked (its launches
counted by the backend's hook), then all of them timed in one hold of the device."""

from __future__ import annotations

import pytest

from support.gpu_judge import RELU_TASK, gpu_eval_config

pytestmark = pytest.mark.gpu

TUNED_RELU = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl

TUNABLE = {"BLOCK": [256, 512, 1024, 2048], "SCALE": [1, 2]}


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, SCALE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0) * SCALE, mask=m)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        block = PARAMS["BLOCK"]
        relu_kernel[(triton.cdiv(x.numel(), block),)](x, y, x.numel(), BLOCK=block, SCALE=PARAMS["SCALE"])
        return y
'''


def test_triton_points_are_built_and_checked_then_timed_together():
    from foundry.evaluate.evaluator import Evaluator
    from foundry.tasks.loader import load_task
    from foundry.types import Candidate

    task = load_task(RELU_TASK, profile="small")
    points = [{"BLOCK": b, "SCALE": s} for s in (1, 2) for b in (256, 512, 1024, 2048)]
    with Evaluator(config=gpu_eval_config()) as ev:
        cand = Candidate.make(task_id=task.task_id, source=TUNED_RELU, backend="triton")
        screened = ev.screen(task=task, candidate=cand, points=points)
    assert [p.params for p in screened] == points
    assert all(p.ok and p.runtime_ms > 0 for p in screened[:4]), screened[:4]
    assert all(not p.ok and "max abs error" in p.error for p in screened[4:]), screened[4:]  # twice the answer
    assert "device_wait_s" in screened[0].seconds
    assert all("timing_s" in p.seconds and "build_trial_s" in p.seconds for p in screened)


def test_a_screens_points_are_built_at_once_before_its_loop():
    """Every point's kernels built by the prebuild's children (the first point's seconds
    say how many); with no prebuild workers, the loop builds them and nothing says so."""
    from foundry.evaluate.evaluator import Evaluator
    from foundry.tasks.loader import load_task
    from foundry.types import Candidate

    task = load_task(RELU_TASK, profile="small")
    points = [{"BLOCK": b, "SCALE": 1} for b in (256, 512, 1024, 2048)]
    for workers in (4, 0):
        with Evaluator(config=gpu_eval_config(screen_prebuild_workers=workers)) as ev:
            cand = Candidate.make(task_id=task.task_id, source=TUNED_RELU.replace('"SCALE": [1, 2]', '"SCALE": [1]'),
                                  backend="triton")
            screened = ev.screen(task=task, candidate=cand, points=points)
        assert all(p.ok for p in screened), screened
        if workers:
            assert screened[0].seconds.get("prebuilt_points") == len(points), screened[0].seconds
        else:
            assert "prebuilt_points" not in screened[0].seconds
