"""What is known about one tensor of a captured forward: shape, dtype and the statistics
its replacements are drawn from (task inputs, task parameters, deploy's example inputs).

Floating-point tensors are drawn as N(mean, std) (uniformly in the captured [min, max]
where every captured value was >= 0, so a variance stays a variance); one whose captured
values were all its min or its max (a float mask of 0s and 1s, such as a causal mask
sliced from a buffer and compared with 0) takes those two values, the max with the
captured share, so a comparison with either still sees both; integer tensors uniformly in
the captured [min, max] (index tensors stay in range); booleans with the captured share of
True. A parameter whose values are all equal (a fresh LayerNorm's ones) is drawn with a
spread, so a kernel that ignores it cannot pass as correct."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch

MIN_TWO_VALUED = 16  # elements a floating-point tensor needs before two values make it a mask
MIN_SPREAD = 0.1  # std of a drawn parameter whose captured values were all equal (relative to |mean|, or absolute)


@dataclass(frozen=True)
class TensorInfo:
    shape: tuple
    dtype: str  # "float32", "int64", "bool", ...
    mean: float = 0.0
    std: float = 1.0
    lo: float = 0.0
    hi: float = 0.0
    contiguous: bool = True
    two_valued: bool = False  # floating point, every captured value lo or hi (lo < hi)

    @staticmethod
    def of(t: torch.Tensor) -> "TensorInfo":
        dtype = str(t.dtype).replace("torch.", "")
        if t.numel() == 0:
            return TensorInfo(tuple(t.shape), dtype)
        d = t.detach()
        two = False
        if d.is_floating_point():
            mean, std, lo, hi = _finite_stats(d)
            two = lo < hi and d.numel() >= MIN_TWO_VALUED and _only(d, lo, hi)
        elif d.dtype == torch.bool:
            mean, std, lo, hi = float(d.float().mean()), 0.0, 0.0, 1.0
        else:
            mean, std = float(d.double().mean()), 0.0
            lo, hi = float(d.min()), float(d.max())
        return TensorInfo(tuple(int(s) for s in t.shape), dtype, mean, std, lo, hi, bool(t.is_contiguous()), two)

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)

    @property
    def is_float(self) -> bool:
        return self.torch_dtype.is_floating_point

    @property
    def magnitude(self) -> float:
        """The largest absolute value a draw like this one is about to take."""
        return max(abs(self.lo), abs(self.hi), abs(self.mean) + self.std)

    def scaled(self, factor: float) -> "TensorInfo":
        """The same distribution multiplied by `factor`."""
        return replace(self, mean=self.mean * factor, std=self.std * abs(factor),
                       lo=min(self.lo * factor, self.hi * factor), hi=max(self.lo * factor, self.hi * factor))

    def draw_std(self, *, spread_constant: bool) -> float:
        if self.std > 0 or not spread_constant:
            return self.std
        return MIN_SPREAD * abs(self.mean) if self.mean != 0 else MIN_SPREAD

    def draw_range(self, *, spread_constant: bool) -> tuple[float, float]:
        if self.lo != self.hi or not spread_constant or not self.is_float:
            return self.lo, self.hi
        s = self.draw_std(spread_constant=True)
        return self.mean - s, self.mean + s

    def expr(self, shape_expr: str, *, spread_constant: bool = False) -> str:
        """Python source drawing a tensor like this one (`shape_expr` names its shape)."""
        lo, hi = self.draw_range(spread_constant=spread_constant)
        return (f"_draw({shape_expr}, torch.{self.dtype}, mean={_lit(self.mean)}, "
                f"std={_lit(self.draw_std(spread_constant=spread_constant))}, "
                f"lo={_lit(lo)}, hi={_lit(hi)}{', two=True' if self.two_valued else ''})")

    def signature(self) -> dict:
        return {"shape": list(self.shape), "dtype": self.dtype}

    def to_json(self) -> dict:
        return {"shape": list(self.shape), "dtype": self.dtype, "mean": self.mean, "std": self.std,
                "lo": self.lo, "hi": self.hi, "contiguous": self.contiguous, "two_valued": self.two_valued}

    @staticmethod
    def from_json(d: dict) -> "TensorInfo":
        return TensorInfo(tuple(d["shape"]), str(d["dtype"]), float(d.get("mean", 0.0)), float(d.get("std", 1.0)),
                          float(d.get("lo", 0.0)), float(d.get("hi", 0.0)), bool(d.get("contiguous", True)),
                          bool(d.get("two_valued", False)))


def _lit(v: float) -> str:
    if math.isnan(v):
        return 'float("nan")'
    if math.isinf(v):
        return 'float("inf")' if v > 0 else '-float("inf")'
    return repr(float(f"{v:.6g}"))


# The same function is written into every task file (DRAW_SOURCE), so a task file stands alone.
DRAW_SOURCE = '''
def _draw(shape, dtype, *, mean=0.0, std=1.0, lo=0.0, hi=0.0, two=False):
    """A random tensor like the captured one: floats N(mean, std), or uniform in [lo, hi]
    when every captured value was >= 0, or (`two`) each lo or hi, hi with the share the
    mean says; integers uniform in [lo, hi]; booleans True with probability mean."""
    if dtype.is_floating_point:
        if two:
            b = (torch.rand(shape) < (mean - lo) / (hi - lo)).to(dtype)  # 0 or 1: the sum below is exact
            return lo * (1 - b) + hi * b
        if lo >= 0:
            return (torch.rand(shape) * (hi - lo) + lo).to(dtype)
        return (torch.randn(shape) * std + mean).to(dtype)
    if dtype == torch.bool:
        return torch.rand(shape) < mean
    return torch.randint(int(lo), int(hi) + 1, shape).to(dtype)
'''

_namespace: dict = {"torch": torch}
exec(DRAW_SOURCE, _namespace)
draw = _namespace["_draw"]


def make_tensor(info: TensorInfo, *, device: str | torch.device = "cpu", spread_constant: bool = False) -> torch.Tensor:
    """A fresh random tensor drawn like `info` (the same rule the task files use)."""
    lo, hi = info.draw_range(spread_constant=spread_constant)
    return draw(info.shape, info.torch_dtype, mean=info.mean, std=info.draw_std(spread_constant=spread_constant),
                lo=lo, hi=hi, two=info.two_valued).to(device)


STATS_CHUNK = 1 << 24  # elements per slab the statistics are taken over


def _slabs(d: torch.Tensor):
    """`d` flat, in slabs of about STATS_CHUNK elements along its first dim (a slab of a
    non-contiguous tensor is copied, never the whole tensor)."""
    if d.dim() == 0:
        yield d.reshape(1)
        return
    per_row = max(1, d[0].numel())
    step = max(1, STATS_CHUNK // per_row)
    for i in range(0, d.shape[0], step):
        yield d[i:i + step].reshape(-1)


def _only(d: torch.Tensor, lo: float, hi: float) -> bool:
    """Is every value of floating-point `d` either `lo` or `hi`? (Slab by slab; most
    tensors answer no on their first slab.)"""
    return all(bool(((slab == lo) | (slab == hi)).all()) for slab in _slabs(d))


def _finite_stats(d: torch.Tensor) -> tuple[float, float, float, float]:
    """(mean, std, min, max) of the finite values of floating-point `d` (all 0.0 where
    none is), merged over slabs (Chan's parallel variance) so that a tensor of several GB
    needs a few slabs' worth of temporaries, not copies of itself."""
    n, mean, m2, lo, hi = 0, 0.0, 0.0, math.inf, -math.inf
    for slab in _slabs(d):
        f = slab.double()
        f = f[torch.isfinite(f)]
        k = f.numel()
        if k == 0:
            continue
        k_mean = float(f.mean())
        k_m2 = float((f - k_mean).square().sum())
        delta = k_mean - mean
        total = n + k
        mean += delta * k / total
        m2 += k_m2 + delta * delta * n * k / total
        n = total
        lo, hi = min(lo, float(f.min())), max(hi, float(f.max()))
    if n == 0:
        return 0.0, 0.0, 0.0, 0.0
    return mean, math.sqrt(m2 / (n - 1)) if n > 1 else 0.0, lo, hi
