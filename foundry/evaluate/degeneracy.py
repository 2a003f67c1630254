"""Is the task itself degenerate (output independent of its inputs, or near-constant)?

The task-side check (`foundry.tasks.degeneracy.check_task`) is used when it exists;
otherwise this minimal check runs on the reference outputs the judge has computed anyway.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Sequence

import torch

from foundry.evaluate.compare import equal_outputs


@dataclass(frozen=True)
class Degeneracy:
    degenerate: bool
    reason: str = ""


def external_check(task: Any, *, device: str = "cpu", overrides: dict | None = None) -> Degeneracy | None:
    """The task package's own check, if it is installed; None otherwise. On "cuda" the
    task's inputs and model are built on the GPU (under a device default); `overrides`
    (e.g. the task's SMALL_SIZES for a large task) size the check."""
    try:
        module = importlib.import_module("foundry.tasks.degeneracy")
    except ImportError:
        return None
    check = getattr(module, "check_task", None)
    if check is None:
        return None
    if device == "cpu":
        report = check(task, overrides=overrides or None)
    else:
        with torch.device(device):
            report = check(task, overrides=overrides or None, device=device)
    return Degeneracy(bool(report.degenerate), str(getattr(report, "reason", "")))


def _tensors(obj: Any) -> list[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for o in obj for t in _tensors(o)]
    if isinstance(obj, dict):
        return [t for o in obj.values() for t in _tensors(o)]
    return []


def _near_constant(t: torch.Tensor) -> bool:
    if t.numel() <= 1:
        return False  # a scalar is judged by whether it changes with the inputs
    x = t.detach().double() if not t.is_complex() else t.detach().abs().double()
    x = x[torch.isfinite(x)]
    if x.numel() == 0:
        return True
    spread = float(x.max() - x.min())
    return spread <= 1e-6 * max(1.0, float(x.abs().max()))


def minimal_check(outputs: Sequence[Any]) -> Degeneracy:
    """`outputs`: the reference's outputs on two or more different inputs."""
    if len(outputs) < 2:
        return Degeneracy(False)
    if all(equal_outputs(outputs[0], o) for o in outputs[1:]):
        return Degeneracy(True, "the reference output does not depend on the inputs")
    tensors = [_tensors(o) for o in outputs]
    if tensors[0] and all(len(ts) == len(tensors[0]) and all(_close(a, b) for a, b in zip(tensors[0], ts))
                          for ts in tensors[1:]):
        return Degeneracy(True, "the reference output barely changes with the inputs")
    if all(ts and all(_near_constant(t) for t in ts) for ts in tensors):
        return Degeneracy(True, "the reference output is near-constant")
    return Degeneracy(False)


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if not (a.is_floating_point() or a.is_complex()):
        return bool(torch.equal(a, b))
    x, y = a.detach().double(), b.detach().double()
    scale = max(1e-30, float(torch.nan_to_num(x, posinf=0, neginf=0).abs().max()) if x.numel() else 1.0)
    return bool(torch.allclose(x, y, rtol=1e-6, atol=1e-6 * scale, equal_nan=True))
