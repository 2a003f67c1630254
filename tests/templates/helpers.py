"""Test helpers: write a KernelBench-format task from a forward body, run candidates."""

from __future__ import annotations

import textwrap
from pathlib import Path

import torch

from foundry.tasks import load_task
from foundry.templates.engine import emit, reference_and_inputs
from foundry.tuning.inprocess import load_candidate

TASKS = Path(__file__).parent / "tasks"


def make_task(tmp_path: Path, name: str, *, forward: str, init: str = "pass", init_args: str = "[]",
              inputs: str = "[torch.randn(4, 33)]", extra: str = "", sig: str = "*xs"):
    src = f'''import torch
import torch.nn as nn
import torch.nn.functional as F
{extra}

class Model(nn.Module):
    def __init__(self, *args):
        super().__init__()
{textwrap.indent(textwrap.dedent(init), " " * 8)}

    def forward(self, {sig}):
{textwrap.indent(textwrap.dedent(forward), " " * 8)}


def get_inputs():
    torch.manual_seed(3)
    return {inputs}


def get_init_inputs():
    return {init_args}
'''
    path = tmp_path / f"{name}.py"
    path.write_text(src)
    return load_task(path, profile="small")


def run_candidate(task, *, backend: str, params: dict | None = None, **emit_kw):
    """(reference output, candidate output) on the same inputs and same-seed weights."""
    src = emit(task, backend=backend, **emit_kw)
    model, init, inputs = reference_and_inputs(task, seed=7)
    mod = load_candidate(src, params or {})
    torch.manual_seed(7)
    new = mod.ModelNew(*init)
    with torch.no_grad():
        return model(*inputs), new(*inputs)


def assert_close(ref, got, atol=1e-4, rtol=1e-4):
    assert got.shape == ref.shape, (got.shape, ref.shape)
    assert got.dtype == ref.dtype, (got.dtype, ref.dtype)
    torch.testing.assert_close(got, ref, atol=atol, rtol=rtol, equal_nan=True)
