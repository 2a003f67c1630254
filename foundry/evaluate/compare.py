"""Comparing a candidate's outputs with the reference's, in the judge's process."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

# (atol, rtol) per dtype; atol is scaled by the reference's RMS (at least 1), so
# heavy-tailed inputs with large outputs are judged relative to their own scale.
DEFAULT_TOLERANCES = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (2e-4, 2e-4),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (2e-2, 2e-2),
    torch.complex64: (2e-4, 2e-4),
    torch.complex128: (1e-7, 1e-7),
}


@dataclass(frozen=True)
class Comparison:
    kind: str  # "ok" | "shape" (structure, shape or dtype) | "value"
    message: str = ""
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    non_finite: bool = False  # the candidate produced NaN/Inf where the reference did not

    @property
    def ok(self) -> bool:
        return self.kind == "ok"


def tolerance(dtype: torch.dtype, atol: float | None, rtol: float | None) -> tuple[float, float]:
    da, dr = DEFAULT_TOLERANCES.get(dtype, (0.0, 0.0))
    return (da if atol is None else atol), (dr if rtol is None else rtol)


def _tensor(ref: torch.Tensor, got: torch.Tensor, where: str, atol, rtol) -> Comparison:
    if tuple(got.shape) != tuple(ref.shape):
        return Comparison("shape", f"{where}: shape {tuple(got.shape)}, expected {tuple(ref.shape)}")
    if got.dtype != ref.dtype:
        return Comparison("shape", f"{where}: dtype {got.dtype}, expected {ref.dtype}")
    if ref.numel() == 0 or bool(torch.equal(ref, got)):
        return Comparison("ok")
    if not (ref.is_floating_point() or ref.is_complex()):
        bad = (got != ref)
        n = int(bad.sum())
        if n:
            diff = (got.double() - ref.double()).abs().max().item() if ref.dtype != torch.bool else 1.0
            return Comparison("value", f"{where}: {n} of {ref.numel()} elements differ", diff, diff)
        return Comparison("ok")
    r = ref.detach().to(torch.complex128 if ref.is_complex() else torch.float64)
    g = got.detach().to(r.dtype)
    r_fin, g_fin = torch.isfinite(r), torch.isfinite(g)
    non_finite = bool((r_fin & ~g_fin).any())
    # where the reference is NaN/Inf the candidate must match it exactly
    special_ok = bool(torch.equal(torch.isnan(r), torch.isnan(g))) and \
        bool(((r == g) | torch.isnan(r) | r_fin).all())
    a, rt = tolerance(ref.dtype, atol, rtol)
    rf = r[r_fin]
    scale = max(1.0, float(rf.abs().pow(2).mean().sqrt())) if rf.numel() else 1.0
    both = r_fin & g_fin
    diff = (g - r).abs()
    d = diff[both]
    max_abs = float(d.max()) if d.numel() else (math.inf if non_finite else 0.0)
    rel = d / r.abs()[both].clamp_min(1e-12) if d.numel() else d
    max_rel = float(rel.max()) if rel.numel() else (math.inf if non_finite else 0.0)
    within = bool((d <= a * scale + rt * r.abs()[both]).all()) if d.numel() else True
    if non_finite:
        n = int((r_fin & ~g_fin).sum())
        return Comparison("value", f"{where}: {n} NaN/Inf values where the reference is finite",
                          max_abs, max_rel, non_finite=True)
    if not special_ok:
        return Comparison("value", f"{where}: NaN/Inf positions differ from the reference", max_abs, max_rel)
    if not within:
        return Comparison("value", f"{where}: max abs error {max_abs:.3g}, max rel error {max_rel:.3g} "
                                   f"(atol {a:g} x scale {scale:.3g}, rtol {rt:g})", max_abs, max_rel)
    return Comparison("ok", "", max_abs, max_rel)


def compare(ref: Any, got: Any, *, atol: float | None = None, rtol: float | None = None,
            where: str = "output") -> Comparison:
    """Compare two output trees (tensors, lists/tuples/dicts of them, scalars)."""
    if isinstance(ref, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            return Comparison("shape", f"{where}: got {type(got).__name__}, expected a tensor")
        return _tensor(ref, got, where, atol, rtol)
    if isinstance(ref, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(got) != len(ref):
            n = len(got) if isinstance(got, (list, tuple)) else type(got).__name__
            return Comparison("shape", f"{where}: got {n} items, expected {len(ref)}")
        return _merge([compare(r, g, atol=atol, rtol=rtol, where=f"{where}[{i}]")
                       for i, (r, g) in enumerate(zip(ref, got))])
    if isinstance(ref, dict):
        if not isinstance(got, dict) or [str(k) for k in ref] != list(got):
            return Comparison("shape", f"{where}: dict keys differ from the reference")
        return _merge([compare(r, got[str(k)], atol=atol, rtol=rtol, where=f"{where}[{k!r}]")
                       for k, r in ref.items()])
    if isinstance(ref, (int, float)) and not isinstance(ref, bool):
        if isinstance(got, bool) or not isinstance(got, (int, float)):
            return Comparison("shape", f"{where}: got {type(got).__name__}, expected a number")
        return _tensor(torch.tensor(float(ref), dtype=torch.float64),
                       torch.tensor(float(got), dtype=torch.float64), where, atol or 1e-6, rtol or 1e-6)
    if ref != got:
        return Comparison("shape", f"{where}: got {got!r:.60}, expected {ref!r:.60}")
    return Comparison("ok")


def _merge(parts: list[Comparison]) -> Comparison:
    if not parts:
        return Comparison("ok")
    for kind in ("shape", "value"):
        bad = [p for p in parts if p.kind == kind]
        if bad:
            return Comparison(kind, bad[0].message, max(p.max_abs_err for p in parts),
                              max(p.max_rel_err for p in parts), any(p.non_finite for p in parts))
    return Comparison("ok", "", max(p.max_abs_err for p in parts), max(p.max_rel_err for p in parts))


def equal_outputs(a: Any, b: Any) -> bool:
    """Bitwise-equal output trees (for the 'different inputs, same answer' guard)."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a, b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(equal_outputs(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(equal_outputs(a[k], b[k]) for k in a)
    return a == b

