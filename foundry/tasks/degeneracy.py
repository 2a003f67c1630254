"""Is a task worth optimising? Catch references whose output barely depends on the inputs.

A task is degenerate when a kernel could pass the correctness check without computing
the function: the output does not change with the inputs, is near-constant, ignores one
of its inputs, or is not finite. `check_task` runs the reference forward on several
random input sets (the task's own `get_inputs()` under different seeds) and on inputs
where one tensor at a time is swapped for a fresh one, and compares the outputs.

Measures (all relative to the output's own magnitude, so they are scale-free):
- change: mean |out(A) - out(B)| / mean |out(A)| for every pair of input sets (the
  verdict uses their average);
- input change: the same with only input i swapped;
- spread: std / mean |.| of one output (a repeated single value is near-constant).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import torch

from foundry.tasks.loader import build_module
from foundry.types import Task

MIN_CHANGE = 3e-2  # on average the output moves 3% of its magnitude when all inputs change
MIN_INPUT_CHANGE = 1e-3  # ... and at least 0.1% when a single input changes
MIN_SPREAD = 1e-6  # an output with more than one element is not one repeated value


@dataclass(frozen=True)
class DegeneracyReport:
    """The verdict for one task. `details` holds the measured figures (plain values)."""

    task_id: str
    degenerate: bool
    reason: str = ""  # empty when not degenerate; else every failed check, "; "-joined
    details: dict = field(default_factory=dict)


def _tensors(out: Any) -> list[torch.Tensor]:
    """Flatten a forward's result (tensor, tuple/list/dict of tensors) to its tensors."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _tensors(o)]
    if isinstance(out, Mapping):
        return [t for o in out.values() for t in _tensors(o)]
    return []


def _flat(out: Any) -> torch.Tensor:
    parts = [t.detach().reshape(-1).float() for t in _tensors(out)]
    if len(parts) == 1:
        return parts[0]
    return torch.cat(parts) if parts else torch.zeros(0)


def _relative_change(a: torch.Tensor, b: torch.Tensor) -> float:
    if a.shape != b.shape:
        return float("inf")  # a differently shaped result certainly changed
    scale = a.abs().mean(dtype=torch.float64).item() if a.numel() else 0.0
    diff = (a - b).abs().mean(dtype=torch.float64).item() if a.numel() else 0.0
    if scale == 0.0:
        return float("inf") if diff > 0 else 0.0
    return diff / scale


def _spread(a: torch.Tensor) -> float | None:
    if a.numel() < 2:
        return None
    scale = a.abs().mean(dtype=torch.float64).item()
    if scale == 0.0:
        return 0.0
    return a.double().std().item() / scale


def _inputs(module: Any, seed: int) -> list[Any]:
    torch.manual_seed(seed)
    return list(module.get_inputs())


def check_task(task: Task, *, trials: int = 3, overrides: Mapping[str, Any] | None = None,
               seed: int = 1234, device: str = "cpu") -> DegeneracyReport:
    """Run `task`'s reference (with its size profile's overrides, then `overrides`) on
    `trials` (>= 2) random input sets and on single-input swaps; report degeneracy.

    A reference that raises is reported degenerate with the error as the reason.
    """
    if trials < 2:
        raise ValueError(f"trials must be at least 2 to compare outputs, got {trials}")
    try:
        module = build_module(task, overrides)
        torch.manual_seed(seed)
        model = module.Model(*module.get_init_inputs()).to(device)
        sets = [[x.to(device) if isinstance(x, torch.Tensor) else x for x in _inputs(module, seed + 1 + t)]
                for t in range(trials)]
        with torch.no_grad():
            outs = [_flat(model(*xs)).cpu() for xs in sets]
            swapped: dict[int, torch.Tensor] = {}
            for i, x in enumerate(sets[0]):
                if not isinstance(x, torch.Tensor):
                    continue  # a plain value (e.g. a dim) is the same in every set
                mixed = list(sets[0])
                mixed[i] = sets[1][i]
                swapped[i] = _flat(model(*mixed)).cpu()
    except Exception as e:  # noqa: BLE001 - any failure of the reference is the verdict
        return DegeneracyReport(task.task_id, True, f"reference failed: {type(e).__name__}: {e}",
                                {"error": f"{type(e).__name__}: {e}"})

    reasons: list[str] = []
    if any(o.numel() == 0 for o in outs):
        reasons.append("the output is empty")
    if not all(torch.isfinite(o).all().item() for o in outs):
        reasons.append("the output has NaN or Inf")
    changes = [_relative_change(outs[a], outs[b]) for a in range(trials) for b in range(a + 1, trials)]
    spreads = [_spread(o) for o in outs]
    input_changes = {i: _relative_change(outs[0], s) for i, s in swapped.items()}
    details = {
        "trials": trials,
        "output_numel": int(outs[0].numel()),
        "change": [round(c, 6) for c in changes],
        "spread": [None if s is None else round(s, 6) for s in spreads],
        "input_change": {str(i): round(c, 6) for i, c in input_changes.items()},
    }
    if not reasons:
        mean_change = sum(changes) / len(changes)
        if mean_change < MIN_CHANGE:
            reasons.append(f"near-constant: the output changes by {mean_change:.2e} of its magnitude "
                           f"on average across random inputs (threshold {MIN_CHANGE:g})")
        if all(s is not None and s < MIN_SPREAD for s in spreads):
            reasons.append("near-constant: every output is one value repeated")
        for i, c in input_changes.items():
            if c < MIN_INPUT_CHANGE:
                reasons.append(f"ignores input {i}: swapping it changes the output by {c:.2e} "
                               f"of its magnitude (threshold {MIN_INPUT_CHANGE:g})")
    return DegeneracyReport(task.task_id, bool(reasons), "; ".join(reasons), details)
