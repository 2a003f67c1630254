"""Inputs at a scale the judge can tell apart.

A written task draws its inputs like the captured ones. Deep in a model at its default
initialisation the activations can be vanishingly small: KernelBench's MobileNetV1
reaches its last layers with values near 1e-10. A conv + BatchNorm + ReLU region fed
such inputs returns about the same output (BatchNorm's shift) for every input set, so
the judge's degeneracy check (foundry.tasks.degeneracy) rightly refuses the task: an
answer that ignores the inputs would pass. The function is the same at every scale, so
such a task draws its floating-point inputs at unit magnitude instead, and its doc says
by how much. Kernels are still checked at the real scale where it matters: deploy
compares each one inside the model.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from foundry.extract.observe import Observed
from foundry.extract.split import Region
from foundry.tasks.degeneracy import DegeneracyCheckError, check_task
from foundry.tasks.loader import load_task


def degeneracy_reason(path: str | Path, *, device: str) -> str | None:
    """Why the judge would refuse the task file at `path` as degenerate (at its full
    sizes, on `device`), or None when it would not or when the check cannot run (the
    written task stands as it is then, and the judge's own check decides)."""
    try:
        report = check_task(load_task(path, profile="full"), device=device)
    except DegeneracyCheckError:
        return None  # no verdict (out of memory): the judge decides later
    except Exception:  # noqa: BLE001 - the judge runs the same check at the task's setup and says why there
        return None
    return report.reason if report.degenerate else None


def unit_scaled(obs: Observed, region: Region) -> tuple[Observed, float] | None:
    """`obs` with the region's small floating-point inputs (largest magnitude below 1,
    masks left alone) scaled up to magnitude 1, and the largest factor used; None when
    no input is small."""
    infos = dict(obs.infos)
    largest = 1.0
    for name in region.inputs:
        info = infos[name]
        if not info.is_float or info.two_valued:
            continue
        magnitude = info.magnitude
        if 0.0 < magnitude < 1.0:
            infos[name] = info.scaled(1.0 / magnitude)
            largest = max(largest, 1.0 / magnitude)
    if largest == 1.0:
        return None
    return replace(obs, infos=infos), largest
