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


def run_candidate(task, *, backend: str, params: dict | None = None, device: str = "cpu", **emit_kw):
    """(reference output, candidate output) on the same inputs and same-seed weights, both
    run on `device` (on a GPU with TF32 off, as the judge runs references)."""
    if torch.device(device).type == "cuda":
        from foundry.evaluate.cuda_timing import apply_tf32_policy
        apply_tf32_policy("off")
    src = emit(task, backend=backend, **emit_kw)
    model, init, inputs = reference_and_inputs(task, seed=7)
    mod = load_candidate(src, params or {})
    torch.manual_seed(7)
    new = mod.ModelNew(*init)
    model, new = model.to(device), new.to(device)
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]
    with torch.no_grad():
        return model(*inputs), new(*inputs)


def judge_c_sources(task, sources) -> list:
    """The real judge's verdicts (EvalResult) on each `c` template source of `task`, in
    order: two trials, no torch.compile baseline, short timing."""
    from foundry.evaluate import Evaluator
    from foundry.evaluate.config import EvalConfig
    from foundry.types import Candidate
    cfg = EvalConfig.from_config({"trials": 2, "compile_baseline": False, "timing_min_ms": 20.0,
                                  "warmup_ms": 5.0, "check_variants": False})
    with Evaluator(config=cfg) as judge:
        return [judge.evaluate(task=task, candidate=Candidate.make(task_id=task.task_id, source=s, backend="c",
                                                                   origin="template"))
                for s in sources]


def assert_close(ref, got, atol=1e-4, rtol=1e-4):
    assert got.shape == ref.shape, (got.shape, ref.shape)
    assert got.dtype == ref.dtype, (got.dtype, ref.dtype)
    torch.testing.assert_close(got, ref, atol=atol, rtol=rtol, equal_nan=True)


def _skip_without(source: Path) -> None:
    import pytest
    if not source.exists():
        pytest.skip(f"the KernelBench problems are not at {source.parent}")


def published_problem(source: Path):
    """The task of the KernelBench problem file `source` at its published sizes (the
    loader's "full" profile); skips the test where the problems are not present."""
    _skip_without(source)
    return load_task(source, profile="full")


def small_problem(tmp_path: Path, source: Path, sizes: dict):
    """The task of the KernelBench problem file `source` at `sizes` (its module-level size
    names set by a SMALL_SIZES block, the loader's "small" profile); skips the test where
    the problems are not present."""
    _skip_without(source)
    path = tmp_path / source.name
    path.write_text(source.read_text() + f"\n\nSMALL_SIZES = {sizes!r}\n")
    return load_task(path, profile="small")
