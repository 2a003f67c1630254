"""Is the task itself degenerate? The judge's verdict, cached on disk, with user overrides.

`judge_degeneracy` gives the judge its verdict from the task-side check
(`foundry.tasks.degeneracy.check_task`: would an input-independent answer pass the
judge's own comparison at the task's tolerance, or does an input not matter?), computed
once per task source, sizes, device, tolerance and torch version and kept in a
`JsonDiskCache`, so later runs and other processes reuse it. A user declares a task not
degenerate with `EvalConfig.degenerate_ok` (task ids, shell-style patterns allowed) or in
the task file (``DEGENERATE_OK = "why"``, read without running the file); then the check
is not run and the verdict says who overrode it (`known_degeneracy`: an override or a
cached verdict, without running the reference). `minimal_check` is the fallback on the
reference outputs the judge has computed anyway, for when the check cannot run.

A verdict also names the task's differential inputs (those the output depends on only
within the tolerance, rule (d) of the check): the judge gives each candidate's job one
paired trial per such input (guard `input_ignored`, foundry/evaluate/input_use.py). An
override, or the fallback, names none.
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

from foundry.evaluate.compare import equal_outputs
from foundry.evaluate.disk_cache import JsonDiskCache
from foundry.evaluate.trial_inputs import declared_literal
from foundry.types import Task, content_hash


@dataclass(frozen=True)
class Degeneracy:
    degenerate: bool
    reason: str = ""
    details: dict = field(default_factory=dict)  # the check's figures (plain values)
    override: str = ""  # non-empty: the user declared the task not degenerate (who and why)
    cached: bool = False  # the verdict came from the on-disk cache
    differential_inputs: tuple[int, ...] = ()  # inputs the judge checks differentially
    differential_reason: str = ""  # why (empty when there are none)


def declared_degenerate_ok(task: Task) -> str:
    """The task file's ``DEGENERATE_OK`` (a non-empty string: why the task is not
    degenerate; True is accepted too), or "" when it declares none. Read with `ast`,
    never by running the file; any other value raises ValueError naming the task."""
    declared, value = declared_literal(task.source, "DEGENERATE_OK")
    if not declared:
        return ""
    if value is True:
        return "declared in the task file"
    if isinstance(value, str) and value.strip():
        return value.strip()
    raise ValueError(f"{task.task_id}: DEGENERATE_OK must be a non-empty string literal saying why "
                     f"the task is not degenerate (or True)")


def listed_degenerate_ok(task: Task, degenerate_ok: Sequence[str]) -> str:
    """The entry of `degenerate_ok` (task ids or shell-style patterns) naming `task`, or ""."""
    if isinstance(degenerate_ok, str):
        raise ValueError(f"degenerate_ok must be a list of task ids, got the string {degenerate_ok!r}")
    for entry in degenerate_ok:
        if task.task_id == str(entry) or fnmatch.fnmatchcase(task.task_id, str(entry)):
            return str(entry)
    return ""


def degeneracy_key(task: Task, *, device: str, overrides: dict | None, atol: float | None,
                   rtol: float | None) -> str:
    """The cache key of a verdict: task source and sizes, device, tolerance, torch version
    and the check's own version and settings."""
    from foundry.tasks.degeneracy import CHECK_VERSION, DEFAULT_SEED, MIN_TRIALS
    return content_hash(task.source, json.dumps(task.size_overrides, sort_keys=True, default=str),
                        json.dumps(overrides or {}, sort_keys=True, default=str), str(torch.device(device).type),
                        repr(atol), repr(rtol), torch.__version__,
                        f"check {CHECK_VERSION} trials {MIN_TRIALS} seed {DEFAULT_SEED}")


def judge_degeneracy(task: Task, *, device: str, atol: float | None, rtol: float | None,
                     cache_dir: str, overrides: dict | None = None,
                     degenerate_ok: Sequence[str] = ()) -> Degeneracy:
    """The judge's verdict on `task` at its own sizes (then `overrides`) on `device`, by
    the judge's comparison with `atol`/`rtol` (None: the task's TOLERANCES, else the
    per-dtype defaults). Cached in `cache_dir` (a hit does not run the reference).
    A task named in `degenerate_ok`, or whose file declares DEGENERATE_OK, is not checked:
    the verdict is not degenerate, with `override` saying why. Raises
    `foundry.tasks.degeneracy.DegeneracyCheckError` when the check cannot run (out of
    memory): no verdict, nothing cached."""
    known = known_degeneracy(task, device=device, atol=atol, rtol=rtol, cache_dir=cache_dir,
                             overrides=overrides, degenerate_ok=degenerate_ok)
    if known is not None:
        return known
    key = degeneracy_key(task, device=device, overrides=overrides, atol=atol, rtol=rtol)
    from foundry.tasks.degeneracy import check_task
    report = check_task(task, overrides=overrides, device=device, atol=atol, rtol=rtol)
    verdict = Degeneracy(bool(report.degenerate), report.reason, dict(report.details),
                         differential_inputs=tuple(report.differential_inputs),
                         differential_reason=report.differential_reason)
    JsonDiskCache(cache_dir).put(key, {
        "task_id": task.task_id, "degenerate": verdict.degenerate, "reason": verdict.reason,
        "details": verdict.details, "differential_inputs": list(verdict.differential_inputs),
        "differential_reason": verdict.differential_reason, "torch": torch.__version__})
    return verdict


def known_degeneracy(task: Task, *, device: str, atol: float | None, rtol: float | None,
                     cache_dir: str, overrides: dict | None = None,
                     degenerate_ok: Sequence[str] = ()) -> Degeneracy | None:
    """`judge_degeneracy`'s verdict where it needs no reference run (a user's override or
    a cached verdict), else None."""
    declared = declared_degenerate_ok(task)
    if declared:
        return Degeneracy(False, override=f"the task file declares DEGENERATE_OK: {declared}")
    listed = listed_degenerate_ok(task, degenerate_ok)
    if listed:
        return Degeneracy(False, override=f"EvalConfig.degenerate_ok lists {listed!r}")
    hit = JsonDiskCache(cache_dir).get(degeneracy_key(task, device=device, overrides=overrides, atol=atol,
                                                      rtol=rtol))
    if hit is None or not isinstance(hit.get("degenerate"), bool):
        return None
    differential = _input_indices(hit.get("differential_inputs", []))  # absent: none
    if differential is None:
        return None
    return Degeneracy(hit["degenerate"], str(hit.get("reason") or ""), dict(hit.get("details") or {}),
                      cached=True, differential_inputs=differential,
                      differential_reason=str(hit.get("differential_reason") or ""))


def _input_indices(value: Any) -> tuple[int, ...] | None:
    """A cached list of input indices, or None when it is not one (the entry is not used)."""
    if not isinstance(value, list) or not all(type(i) is int and i >= 0 for i in value):
        return None
    return tuple(value)


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
