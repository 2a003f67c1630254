"""Whether a swapped-in kernel is faster than its region's own code here: both timed in
this process, interleaved, on the values the region sees in the model (its real inputs and
the model's parameters), the kernel through the call the deployed model makes.

The run's verdict alone is not enough: the judge times its eager baseline once per task
(and caches it) while it times each candidate later, so a change of the machine's load
between the two moves the speedup it records; here both are timed side by side."""

from __future__ import annotations

from dataclasses import dataclass

from foundry.extract.timing import interleaved_median_ms


@dataclass(frozen=True)
class RegionSpeed:
    kernel_ms: float
    region_ms: float

    @property
    def speedup(self) -> float:
        return self.region_ms / self.kernel_ms if self.kernel_ms > 0 else float("inf")


def time_region(dispatch, args: list, *, device: str = "cpu") -> RegionSpeed:
    """The median time of `dispatch` (a RegionDispatch with its kernel) and of its
    fallback (the region's original code) on `args`; the dispatch's call counts are left
    as they were."""
    calls = (dispatch.kernel_calls, dispatch.fallback_calls)
    fallback = dispatch.fallback
    try:
        kernel_ms, region_ms = interleaved_median_ms([lambda: dispatch(list(args)), lambda: fallback(*args)],
                                                     device=device)
    finally:
        dispatch.kernel_calls, dispatch.fallback_calls = calls
    return RegionSpeed(kernel_ms=kernel_ms, region_ms=region_ms)



@dataclass(frozen=True)
class ModelSpeed:
    deployed_ms: float
    original_ms: float

    @property
    def speedup(self) -> float:
        return self.original_ms / self.deployed_ms if self.deployed_ms > 0 else float("inf")


def time_model(deployed, original, inputs: tuple, *, dispatches=(), device: str = "cpu") -> ModelSpeed:
    """The rewritten model and the original timed the same way, interleaved, on `inputs`;
    the call counts of `dispatches` (the swapped regions) are left as they were."""
    import torch
    calls = [(d.kernel_calls, d.fallback_calls) for d in dispatches]
    try:
        with torch.no_grad():
            deployed_ms, original_ms = interleaved_median_ms([lambda: deployed(*inputs), lambda: original(*inputs)],
                                                             device=device)
    finally:
        for d, (k, f) in zip(dispatches, calls):
            d.kernel_calls, d.fallback_calls = k, f
    return ModelSpeed(deployed_ms=deployed_ms, original_ms=original_ms)
