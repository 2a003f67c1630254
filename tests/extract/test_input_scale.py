"""Tasks whose captured inputs are so small that the output hardly depends on them (deep
layers of a model at its default initialisation) draw their inputs at unit magnitude, so
that the judge can tell a kernel that computes the function from one that does not."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from foundry.extract import extract
from foundry.extract.values import TensorInfo
from foundry.tasks.degeneracy import check_task
from foundry.tasks.inputs import InputSpec, make_inputs
from foundry.tasks.loader import build_module, load_task


class ConvNormRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 16, 3, padding=1, bias=False)
        self.norm = nn.BatchNorm2d(16)
        with torch.no_grad():
            self.norm.running_mean.uniform_(-0.5, 0.5)
            self.norm.bias.uniform_(0.5, 1.0)

    def forward(self, x):
        return torch.relu(self.norm(self.conv(x)))


def _task_and_inputs(path):
    task = load_task(path, profile="full")
    return task, make_inputs(build_module(task), InputSpec(0))


def _extract(scale: float, tmp_path):
    torch.manual_seed(0)
    model = ConvNormRelu().eval()
    manifest = extract(model, (torch.rand(2, 8, 10, 10) * scale,), tmp_path)
    (region,) = manifest.regions
    return _task_and_inputs(tmp_path / region.file)


def test_vanishing_inputs_are_drawn_at_unit_scale_and_the_task_is_judgeable(tmp_path):
    task, (x,) = _extract(1e-10, tmp_path)
    assert 0.5 < float(x.abs().max()) <= 1.0, float(x.abs().max())
    assert "captured scale" in task.source
    report = check_task(task, device="cpu")
    assert not report.degenerate, report.reason


def test_inputs_at_a_sane_scale_are_drawn_as_captured(tmp_path):
    task, (x,) = _extract(3.0, tmp_path)
    assert float(x.abs().max()) > 2.0
    assert "captured scale" not in task.source
    assert not check_task(task, device="cpu").degenerate


def test_a_scaled_draw_keeps_its_shape_of_distribution():
    info = TensorInfo((4,), "float32", mean=-2e-9, std=1e-9, lo=-5e-9, hi=1e-9)
    assert abs(info.magnitude - 5e-9) < 1e-20
    big = info.scaled(1 / info.magnitude)
    assert (big.mean, big.std, big.lo, big.hi) == pytest.approx((-0.4, 0.2, -1.0, 0.2))
    assert big.shape == info.shape and big.dtype == info.dtype
