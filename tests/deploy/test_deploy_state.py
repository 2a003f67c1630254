"""A forward that rebinds its model's tensor attributes (a recurrent cell keeping its
hidden state as `self.hidden = ...`): the captured graph would drop the assignment, so
deploy puts in only regions that are one submodule's forward, and says why of the rest."""

from __future__ import annotations

import torch
import torch.nn as nn

from tests.deploy.test_deploy import GELU_KERNEL, _models, make_run

from foundry.deploy import deploy
from foundry.deploy.state import rebound_by_forward
from foundry.extract import extract


class Remembers(nn.Module):
    """small_models' SmallMLP that keeps its last output, as a recurrent cell its state."""

    def __init__(self):
        super().__init__()
        self.mlp = _models().SmallMLP()
        self.last = torch.zeros(8, 16)

    def forward(self, x):
        out = self.mlp(x)
        self.last = out
        return out


class Counts(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.register_buffer("calls", torch.zeros(()))
        self.plain = torch.zeros(2, 4)

    def forward(self, x):
        self.calls.add_(1)  # in place: a captured graph writes it too
        self.plain.copy_(x)
        return self.fc(x)


def test_rebinding_is_told_from_writing_in_place():
    counts = Counts()
    assert rebound_by_forward(counts, (torch.randn(2, 4),)) == ()
    assert counts.calls.item() == 1  # the forward ran on the model itself
    model = Remembers()
    assert rebound_by_forward(model, (torch.randn(8, 16),)) == ("last",)

    class Sets(nn.Module):
        def forward(self, x):
            self.seen = x * 2  # a tensor attribute the model did not have
            return x

    assert rebound_by_forward(Sets(), (torch.randn(3),)) == ("seen",)


def test_a_region_across_modules_stays_out_of_a_model_that_rebinds_its_state(tmp_path):
    torch.manual_seed(0)
    model, inputs = Remembers().eval(), (torch.randn(8, 16),)
    manifest = extract(model, inputs, tmp_path / "tasks")
    task_id = next(r.task_id for r in manifest.regions if r.label == "linear_gelu")
    run = make_run(tmp_path / "run", tmp_path / "tasks", task_id, GELU_KERNEL, speedup=1.5)
    back = deploy(model, run, example_inputs=inputs, check_speed=False)
    info = back.foundry_deploy
    assert back is model and info.swapped == () and info.returned == "original"
    why = [w for t, w in info.passed_over if t == task_id]
    assert len(why) == 2 and all("rebinds last" in w and "not one submodule's forward" in w for w in why)
