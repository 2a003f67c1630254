"""Whether swapping kernels in makes things faster here: the swapped-in code and the code
as it was, both timed in this process, interleaved, on the same values. For one region
(`time_region`): its kernel through the call the deployed model makes, against the
region's own code, on the values the region sees in the model (its real inputs and the
model's parameters). For the whole model (`time_model`): the rewritten model against the
user's own.

The run's verdict alone is not enough: the judge times its eager baseline once per task
(and caches it) while it times each candidate later, so a change of the machine's load
between the two moves the speedup it records; here both are timed side by side. And a
kernel faster on its own can still lose in the model (the captured graph's own ops, one
launch per region)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from foundry.extract.timing import interleaved_median_ms


@dataclass(frozen=True)
class SideBySide:
    swapped_ms: float  # with the kernels in
    original_ms: float  # the code as it was

    @property
    def speedup(self) -> float:
        return self.original_ms / self.swapped_ms if self.swapped_ms > 0 else float("inf")

    @property
    def faster(self) -> bool:
        return self.swapped_ms < self.original_ms


def _time(swapped: Callable[[], object], original: Callable[[], object], *, dispatches=(),
          device: str) -> SideBySide:
    """Both callables timed interleaved; the call counts of `dispatches` are left as they were."""
    calls = [(d.kernel_calls, d.fallback_calls) for d in dispatches]
    try:
        swapped_ms, original_ms = interleaved_median_ms([swapped, original], device=device)
    finally:
        for d, (k, f) in zip(dispatches, calls):
            d.kernel_calls, d.fallback_calls = k, f
    return SideBySide(swapped_ms=swapped_ms, original_ms=original_ms)


def time_region(dispatch, args: list, *, device: str = "cpu") -> SideBySide:
    """`dispatch` (a RegionDispatch with its kernel) against its fallback (the region's
    original code) on `args`."""
    fallback = dispatch.fallback
    return _time(lambda: dispatch(list(args)), lambda: fallback(*args), dispatches=(dispatch,), device=device)


def time_model(deployed, original, inputs: tuple, *, dispatches=(), device: str = "cpu") -> SideBySide:
    """The rewritten model against the original on `inputs` (`dispatches`: its swapped
    regions, whose call counts are left as they were)."""
    return _time(lambda: deployed(*inputs), lambda: original(*inputs), dispatches=dispatches, device=device)
