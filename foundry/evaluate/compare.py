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


# elements per slice of a streamed comparison: temporaries stay small (a few slices of
# float64), so a comparison of 1-2 GB outputs needs no full-size float64 copies, and it
# runs where the tensors are (on the GPU for device outputs, never through the CPU)
CHUNK_CPU = 1 << 22
CHUNK_CUDA = 1 << 26


def _chunks(ref: torch.Tensor, got: torch.Tensor):
    r, g = ref.detach().reshape(-1), got.detach().reshape(-1)
    step = CHUNK_CPU if r.device.type == "cpu" else CHUNK_CUDA
    for s in range(0, r.numel(), step):
        yield r[s:s + step], g[s:s + step]


def _work_dtype(dtype: torch.dtype) -> torch.dtype:
    """Slices with NaN/Inf are judged in double precision, as whole tensors used to be."""
    return torch.complex128 if dtype.is_complex else torch.float64


def _fast_dtype(dtype: torch.dtype) -> torch.dtype:
    """All-finite slices: float32 for float32/float16/bfloat16 (their differences are exact
    in float32 wherever they are near a tolerance), else double precision."""
    if dtype.is_complex or dtype == torch.float64:
        return _work_dtype(dtype)
    return torch.float32


def _tensor(ref: torch.Tensor, got: torch.Tensor, where: str, atol, rtol) -> Comparison:
    if tuple(got.shape) != tuple(ref.shape):
        return Comparison("shape", f"{where}: shape {tuple(got.shape)}, expected {tuple(ref.shape)}")
    if got.dtype != ref.dtype:
        return Comparison("shape", f"{where}: dtype {got.dtype}, expected {ref.dtype}")
    if got.device != ref.device:
        got = got.to(ref.device)
    if ref.numel() == 0 or bool(torch.equal(ref, got)):
        return Comparison("ok")
    if not (ref.is_floating_point() or ref.is_complex()):
        n, diff = 0, 0.0
        for r, g in _chunks(ref, got):
            bad = g != r
            k = int(bad.sum())
            if k:
                n += k
                diff = max(diff, 1.0 if ref.dtype == torch.bool else
                           float((g.double() - r.double()).abs().max()))
        if n:
            return Comparison("value", f"{where}: {n} of {ref.numel()} elements differ", diff, diff)
        return Comparison("ok")
    a, rt = tolerance(ref.dtype, atol, rtol)
    work = _fast_dtype(ref.dtype)
    n_non_finite = 0
    special_ok = True
    sumsq, n_fin = 0.0, 0
    max_abs = max_rel = 0.0
    need = -math.inf  # max over finite pairs of |g - r| - rtol * |r|: within iff <= atol * scale
    any_both = False
    for rc, gc in _chunks(ref, got):
        r, g = rc.to(work), gc.to(work)
        if bool(torch.isfinite(r).all()) and bool(torch.isfinite(g).all()):
            # the common case, in few passes: no masks needed
            ra = r.abs()
            top = float(ra.max())
            if work == torch.float32 and top < 1e15:  # no float32 overflow of the squares
                sumsq += float(torch.dot(r, r))
            else:
                sumsq += float(ra.double().pow(2).sum())
            n_fin += r.numel()
            any_both = True
            d = (g - r).abs_()
            max_abs = max(max_abs, float(d.max()))
            need = max(need, float((d - ra * rt).max()))
            max_rel = max(max_rel, float((d / ra.clamp_min_(1e-12)).max()))
            continue
        r, g = r.to(_work_dtype(ref.dtype)), g.to(_work_dtype(ref.dtype))
        r_fin, g_fin = torch.isfinite(r), torch.isfinite(g)
        n_non_finite += int((r_fin & ~g_fin).sum())
        # where the reference is NaN/Inf the candidate must match it exactly
        if special_ok and not (bool(torch.equal(torch.isnan(r), torch.isnan(g)))
                               and bool(((r == g) | torch.isnan(r) | r_fin).all())):
            special_ok = False
        ra = r.abs()
        zero = torch.zeros((), dtype=ra.dtype, device=ra.device)
        sumsq += float(torch.where(r_fin, ra, zero).pow(2).sum())
        n_fin += int(r_fin.sum())
        both = r_fin & g_fin
        if not bool(both.any()):
            continue
        any_both = True
        d = torch.where(both, (g - r).abs(), zero)
        max_abs = max(max_abs, float(d.max()))
        max_rel = max(max_rel, float(torch.where(both, d / ra.clamp_min(1e-12), zero).max()))
        need = max(need, float(torch.where(both, d - rt * ra,
                                           torch.full((), -math.inf, dtype=ra.dtype, device=ra.device)).max()))
    non_finite = n_non_finite > 0
    if not any_both:
        max_abs = max_rel = math.inf if non_finite else 0.0
    scale = max(1.0, math.sqrt(sumsq / n_fin)) if n_fin else 1.0
    within = need <= a * scale
    if non_finite:
        return Comparison("value", f"{where}: {n_non_finite} NaN/Inf values where the reference is finite",
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
        if a.device != b.device:
            b = b.to(a.device)
        return a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a, b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(equal_outputs(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(equal_outputs(a[k], b[k]) for k in a)
    return a == b

