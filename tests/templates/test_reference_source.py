"""The reference module a template or seed candidate embeds: the task's code less its
input generators and the forward's helpers nothing calls any more."""

from __future__ import annotations

from pathlib import Path

import pytest

from foundry.evaluate.backends import get_backend
from foundry.evaluate.static_checks import check_source
from foundry.tasks.loader import load_task
from foundry.templates.candidate import reference_source
from foundry.templates.engine import emit

ROOT = Path(__file__).resolve().parents[2]

TASK = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


def _bn(x, stats):
    return F.batch_norm(x, stats.running_mean, stats.running_var, training=False)


def _uses_bn(x, stats):
    return _bn(x, stats)


def _width(channels):
    return channels * 2


def _called_by_the_candidate(x):
    return x


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, _width(channels), 3)

    def forward(self, x):
        return _uses_bn(self.conv(x), self)


def get_inputs():
    return [torch.randn(1, 2, 8, 8)]


def get_init_inputs():
    return [2]
'''


def test_the_forwards_helpers_go_with_it_and_what_is_still_used_stays():
    src = reference_source(TASK, used_by="y = _called_by_the_candidate(x)")
    assert "_bn" not in src and "_uses_bn" not in src and "F.batch_norm" not in src  # a chain of dead helpers
    assert "def _width" in src  # the constructor calls it
    assert "def _called_by_the_candidate" in src  # the rest of the candidate names it
    assert "get_inputs" not in src and "class _ReferenceModel" in src


@pytest.mark.parametrize("name", ["04_Residual_conv_block", "03_Small_conv_net"])
def test_a_template_for_a_net_whose_batch_norm_is_torch_code_passes_the_static_checks(name):
    """The suite's ResNet block computes its batch norm in a module-level helper, its small
    conv net in a submodule's forward; the template computes it in a kernel, and neither
    the helper nor the forward it no longer calls is left for the torch-compute check."""
    task = load_task(ROOT / "benchmarks" / "suite" / "level3" / f"{name}.py", profile="small")
    src = emit(task, backend="c", variant="fused")
    assert "F.batch_norm" not in src
    assert set(check_source(src, backend=get_backend("c")).flags) == set()


def test_the_task_modules_forwards_are_left_out():
    src = reference_source(TASK + """

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1))

    def forward(self, x):
        return torch.softmax(x * self.scale, -1)
""")
    assert "def forward" not in src and "softmax" not in src and "self.scale = nn.Parameter" in src
