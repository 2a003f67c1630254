"""Task loading: KernelBench files unchanged, size profiles, extensions, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from foundry.tasks import TaskError, build_module, load_task, make_inputs, task_id_for
from foundry.tasks.inputs import InputSpec

SMOKE = Path(__file__).resolve().parents[2] / "benchmarks" / "smoke"

PLAIN = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
        return torch.tanh(x)

N = 1024

def get_inputs():
    return [torch.randn(N)]

def get_init_inputs():
    return []
'''


def test_smoke_tasks_load_with_small_sizes():
    for path in sorted(SMOKE.glob("*.py")):
        task = load_task(path)
        assert task.size_profile == "small" and task.size_overrides, path
        module = build_module(task)
        inputs = make_inputs(module, InputSpec(0))
        out = module.Model(*module.get_init_inputs())(*inputs)
        assert isinstance(out, torch.Tensor)


def test_profiles_and_variants():
    small = load_task(SMOKE / "relu.py")
    full = load_task(SMOKE / "relu.py", profile="full")
    assert small.size_overrides == {"batch_size": 8, "dim": 4096} and full.size_overrides == {}
    assert small.variants == ({"batch_size": 3, "dim": 1001},)
    m = build_module(small, small.variants[0])
    assert make_inputs(m, InputSpec(1))[0].shape == (3, 1001)
    assert build_module(full).dim == 16384
    assert small.source_hash != full.source_hash
    with pytest.raises(TaskError, match="profile"):
        load_task(SMOKE / "relu.py", profile="tiny")


def test_plain_kernelbench_file_loads_unchanged(tmp_path):
    d = tmp_path / "level1"
    d.mkdir()
    path = d / "22_Tanh.py"
    path.write_text(PLAIN)
    task = load_task(path)
    assert task.task_id == "level1/22_Tanh" and task.level == 1 and task.size_overrides == {}
    assert task_id_for(path) == "level1/22_Tanh"
    assert task.atol is None and task.rtol is None


def test_tolerances_and_instructions(tmp_path):
    path = tmp_path / "t.py"
    path.write_text(PLAIN + '\nTOLERANCES = {"atol": 1e-3, "rtol": 2e-3}\nINSTRUCTIONS = "fuse it"\nLEVEL = 2\n')
    task = load_task(path)
    assert (task.atol, task.rtol, task.instructions, task.level) == (1e-3, 2e-3, "fuse it", 2)


@pytest.mark.parametrize("text,match", [
    ("def (:", "not valid Python"),
    ("import torch\n", "missing Model"),
    (PLAIN + "\nSMALL_SIZES = dict(N=3)\n", "literal"),
])
def test_bad_task_files(tmp_path, text, match):
    path = tmp_path / "bad.py"
    path.write_text(text)
    with pytest.raises(TaskError, match=match):
        load_task(path)


def test_missing_file_and_unknown_override(tmp_path):
    with pytest.raises(TaskError, match="cannot read"):
        load_task(tmp_path / "nope.py")
    path = tmp_path / "t.py"
    path.write_text(PLAIN)
    with pytest.raises(TaskError, match="'M'"):
        build_module(load_task(path), {"M": 3})
