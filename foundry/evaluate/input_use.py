"""The differential check of an input that moves a task's output only within the tolerance.

Some tasks depend on an input by less than the comparison's tolerance: a loss averaged
over many rows changes by about half the tolerance when its integer targets are redrawn,
so a candidate that ignores the targets passes the plain comparison. The degeneracy
check (`foundry.tasks.degeneracy`, rule (d)) lists such inputs as `differential_inputs`;
the judge's job then has one paired trial per such input i: main trial 0's inputs with
input i redrawn from another seed (`job_plan.paired_trial`). The paired trial is compared
with its reference like any trial and, in addition, the two trials' changes are compared:

    d_ref  = ref(paired)  - ref(trial 0)
    d_cand = cand(paired) - cand(trial 0)
    the candidate fails (guard `input_ignored`) when rms(d_cand - d_ref) > 0.5 * rms(d_ref)

over every element of every output tensor (positions where either change is NaN/Inf left
out). A candidate that ignores input i has d_cand = 0 and so an error of rms(d_ref): it
fails whenever redrawing the input moves the reference at all. An honest one shares
every other input between the two trials, so most of its rounding error cancels in
d_cand. Pure functions over outputs the judge holds; slices are small (no full-size
float64 copies) and stay on the outputs' device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterator

import torch

MAX_DEVIATION = 0.5  # of rms(d_ref): the largest rms(d_cand - d_ref) a candidate may show
CHUNK = 1 << 22  # elements per slice


@dataclass(frozen=True)
class ChangeCheck:
    """How the candidate's change follows the reference's, in RMS over the outputs."""

    ref_change: float  # rms(d_ref)
    cand_change: float  # rms(d_cand)
    error: float  # rms(d_cand - d_ref)

    @property
    def ok(self) -> bool:
        return not self.error > MAX_DEVIATION * self.ref_change


def _flatten(tree: Any, leaves: list) -> Any:
    """The tree's structure (sequences, dict keys, where values are); its values are
    appended to `leaves` as tensors."""
    if isinstance(tree, (tuple, list)):
        return ("seq", tuple(_flatten(t, leaves) for t in tree))
    if isinstance(tree, dict):
        keys = sorted(tree, key=str)
        return ("dict", tuple(str(k) for k in keys), tuple(_flatten(tree[k], leaves) for k in keys))
    if isinstance(tree, torch.Tensor):
        leaves.append(tree.detach())
        return ("value", tuple(tree.shape))
    if isinstance(tree, (int, float, complex)) and not isinstance(tree, bool):
        leaves.append(torch.tensor(tree, dtype=torch.complex128 if isinstance(tree, complex) else torch.float64))
        return ("value", ())
    return ("other",)  # None, strings, ...: no values to compare here


def _slices(ref_base: torch.Tensor, ref_paired: torch.Tensor, cand_base: torch.Tensor,
            cand_paired: torch.Tensor) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(d_ref, d_cand - d_ref) slice by slice, in double precision, on the reference's device."""
    device = ref_base.device
    flat = [t.reshape(-1) for t in (ref_base, ref_paired, cand_base, cand_paired)]
    work = torch.complex128 if any(t.is_complex() for t in flat) else torch.float64
    for s in range(0, flat[0].numel(), CHUNK):
        r0, r1, c0, c1 = (t[s:s + CHUNK].to(device=device, dtype=work) for t in flat)
        d_ref = r1 - r0
        yield d_ref, (c1 - c0) - d_ref


def change_check(ref_base: Any, ref_paired: Any, cand_base: Any, cand_paired: Any) -> ChangeCheck | None:
    """The figures of the rule above for two trials' outputs (any output tree); None when
    the candidate's outputs do not have the reference's structure and shapes (the plain
    comparison fails those)."""
    trees: list[list] = [[], [], [], []]
    shapes = {_flatten(t, leaves) for t, leaves in zip((ref_base, ref_paired, cand_base, cand_paired), trees)}
    if len(shapes) != 1:
        return None
    ref_sq = err_sq = cand_sq = 0.0
    n = 0
    for leaves in zip(*trees):
        for d_ref, dev in _slices(*leaves):
            keep = torch.isfinite(d_ref) & torch.isfinite(dev)
            d_ref, dev = d_ref[keep], dev[keep]
            n += int(d_ref.numel())
            ref_sq += float(d_ref.abs().square().sum())
            err_sq += float(dev.abs().square().sum())
            cand_sq += float((dev + d_ref).abs().square().sum())
    if n == 0:
        return ChangeCheck(0.0, 0.0, 0.0)
    return ChangeCheck(math.sqrt(ref_sq / n), math.sqrt(cand_sq / n), math.sqrt(err_sq / n))
