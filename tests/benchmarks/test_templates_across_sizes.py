"""benchmarks/templates_across_sizes.py on a small folder: a task with SMALL_SIZES is
checked at them (exit 0 when its candidates agree), and a candidate that fixes the group
count at the traced sizes is reported and fails the run."""

from __future__ import annotations

import json
import sys

import pytest

from support.benchmark_script import load_benchmark

pytest.importorskip("triton")

TASK = '''import torch
import torch.nn as nn

GROUPS = 4
CHANNELS = 8
SMALL_SIZES = {"GROUPS": 2}


class Model(nn.Module):
    def __init__(self, groups, channels):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(2, CHANNELS, 5, 6)]


def get_init_inputs():
    return [GROUPS, CHANNELS]
'''

FIXED_GROUPS = '''import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, groups, channels):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels)

    def forward(self, x):
        return F.group_norm(x, 4, self.norm.weight, self.norm.bias, self.norm.eps)
'''


def _run(tmp_path, monkeypatch, *extra):
    folder = tmp_path / "tasks"
    folder.mkdir()
    (folder / "1_group_norm.py").write_text(TASK)
    out = tmp_path / "rows.json"
    monkeypatch.setattr(sys, "argv", ["templates_across_sizes.py", "--path", str(folder), "--out", str(out), *extra])
    return load_benchmark("templates_across_sizes").main(), json.loads(out.read_text())


def test_a_group_norm_task_agrees_at_its_small_sizes(tmp_path, monkeypatch):
    code, rows = _run(tmp_path, monkeypatch)
    assert code == 0
    assert [r["task"] for r in rows] == ["1_group_norm"] and rows[0]["ok"]
    assert rows[0]["sizes"] == [{"GROUPS": 2}] and rows[0]["errors"][0] < 1e-4


def test_a_group_count_fixed_at_the_traced_sizes_fails_the_run(tmp_path, monkeypatch):
    script = load_benchmark("templates_across_sizes")
    monkeypatch.setattr(script, "emit", lambda task, backend, variant: FIXED_GROUPS)
    code, rows = _run(tmp_path, monkeypatch)
    assert code == 1
    assert not rows[0]["ok"] and rows[0]["errors"][0] > 1e-3 and "max abs error" in rows[0]["message"]
