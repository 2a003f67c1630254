"""Check a written task file: loaded by the project's task loader, its `Model` with the
region's real parameters computes the region's captured outputs from its captured inputs."""

from __future__ import annotations

from pathlib import Path

import torch

from foundry.tasks.loader import build_module, load_task

RTOL = 1e-5
ATOL = 1e-6


def load_task_model(path: str | Path, params: dict | None = None) -> torch.nn.Module:
    """The task's `Model(*get_init_inputs())` in eval mode, with `params` (task parameter
    path -> tensor) copied in."""
    module = build_module(load_task(path, profile="full"))
    model = module.Model(*module.get_init_inputs()).eval()
    with torch.no_grad():
        for name, value in (params or {}).items():
            target = model.get_parameter(name) if name in dict(model.named_parameters()) else model.get_buffer(name)
            target.copy_(value)
    return model


def as_outputs(got) -> tuple:
    """A forward's result as a tuple of outputs."""
    return tuple(got) if isinstance(got, (tuple, list)) else (got,)


def structure_mismatch(got: tuple, expected: tuple) -> str | None:
    """None when `got` has `expected`'s number of outputs, each a tensor of its shape and
    dtype, else the first difference."""
    if len(got) != len(expected):
        return f"{len(got)} outputs, expected {len(expected)}"
    for i, (g, e) in enumerate(zip(got, expected)):
        if not isinstance(g, torch.Tensor) or g.shape != e.shape or g.dtype != e.dtype:
            what = f"{tuple(g.shape)} {g.dtype}" if isinstance(g, torch.Tensor) else type(g).__name__
            return f"output {i} is {what}, expected {tuple(e.shape)} {e.dtype}"
    return None


def same_outputs(got, expected: tuple) -> str | None:
    """None when `got` (a tensor or tuple) matches `expected`, else what differs."""
    got = as_outputs(got)
    wrong = structure_mismatch(got, expected)
    if wrong:
        return wrong
    for i, (g, e) in enumerate(zip(got, expected)):
        if e.is_floating_point():
            scale = float(e.abs().max()) if e.numel() else 1.0
            if not torch.allclose(g, e, rtol=RTOL, atol=ATOL * max(1.0, scale), equal_nan=True):
                return f"output {i} differs by up to {float((g - e).abs().max()):.3g}"
        elif not torch.equal(g, e):
            return f"output {i} differs"
    return None


def check_task(path: str | Path, params: dict, inputs: tuple, expected: tuple) -> str | None:
    """None when the task at `path` reproduces the region, else why not."""
    try:
        model = load_task_model(path, params)
        device = next((x.device for x in inputs if isinstance(x, torch.Tensor)), None)
        if device is not None:  # a model captured on a GPU: the task's Model runs there too
            model = model.to(device)
        with torch.no_grad():
            got = model(*inputs)
    except Exception as e:  # noqa: BLE001 - any failure means this spelling does not work
        return f"{type(e).__name__}: {str(e)[:300]}"
    return same_outputs(got, expected)
