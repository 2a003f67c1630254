"""The degeneracy check passes every suite task at small sizes and catches references
whose output is constant, near-constant, ignores an input, or is not finite."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from foundry.tasks.degeneracy import DegeneracyReport, check_task
from foundry.tasks.loader import load_task
from foundry.tasks.suite import load_suite

TEMPLATE = '''import torch
import torch.nn as nn

N = 256
SMALL_SIZES = {{"N": 64}}


class Model(nn.Module):
    def forward(self, {args}):
        {body}


def get_inputs():
    return {inputs}


def get_init_inputs():
    return []
'''


def _task(tmp_path: Path, name: str, body: str, args: str = "x", inputs: str = "[torch.randn(N, N)]"):
    path = tmp_path / f"{name}.py"
    path.write_text(TEMPLATE.format(args=args, body=body, inputs=inputs))
    return load_task(path, profile="small")


def test_every_suite_task_is_not_degenerate():
    reports = [check_task(t, trials=2) for t in load_suite(profile="small")]
    bad = [(r.task_id, r.reason) for r in reports if r.degenerate]
    assert not bad
    assert len(reports) >= 63


def test_a_healthy_task_reports_its_measures(tmp_path):
    report = check_task(_task(tmp_path, "ok", "return torch.tanh(x) * 2"))
    assert isinstance(report, DegeneracyReport) and not report.degenerate and report.reason == ""
    assert report.details["output_numel"] == 64 * 64  # small sizes were applied
    assert min(report.details["change"]) > 0.5 and report.details["input_change"]["0"] > 0.5
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.degenerate = True  # type: ignore[misc]


@pytest.mark.parametrize("name,body,args,inputs,expect", [
    # softmax over a dimension of size 1: always 1.0
    ("softmax_dim1", "return torch.softmax(x, dim=1)", "x", "[torch.randn(N, 1)]", "near-constant"),
    # mean over everything, then a saturating op: varies by ~1e-4 of its value
    ("mean_sigmoid_sum", "return torch.sigmoid(x).sum()", "x", "[torch.randn(N, N)]", "near-constant"),
    # a large constant offset swamps the input-dependent part
    ("offset", "return x.mean(dim=1) * 1e-4 + 100.0", "x", "[torch.randn(N, N)]", "near-constant"),
    # the second input is never used
    ("ignores_y", "return torch.relu(x)", "x, y", "[torch.randn(N, N), torch.randn(N, N)]", "ignores input 1"),
    # one value broadcast over the output
    ("broadcast", "return torch.zeros_like(x) + 3.0", "x", "[torch.randn(N, N)]", "near-constant"),
    ("not_finite", "return torch.log(x - 10.0)", "x", "[torch.randn(N, N)]", "NaN or Inf"),
    ("raises", "raise RuntimeError('broken reference')", "x", "[torch.randn(N, N)]", "reference failed: RuntimeError"),
])
def test_degenerate_tasks_are_caught(tmp_path, name, body, args, inputs, expect):
    report = check_task(_task(tmp_path, name, body, args, inputs))
    assert report.degenerate, report
    assert expect in report.reason


def test_trials_must_allow_a_comparison(tmp_path):
    with pytest.raises(ValueError, match="trials must be at least 2"):
        check_task(_task(tmp_path, "ok", "return x"), trials=1)


def test_overrides_apply_on_top_of_the_profile(tmp_path):
    report = check_task(_task(tmp_path, "ok", "return x * 2"), overrides={"N": 8})
    assert report.details["output_numel"] == 64
