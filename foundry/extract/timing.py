"""Wall-clock time of a callable on the target device: warm-up, then repeated calls until
both a minimum count and a minimum time are reached; the median, in milliseconds."""

from __future__ import annotations

import statistics
import time
from typing import Callable

import torch

MIN_REPS = 5
MIN_TIME_S = 0.2
MAX_REPS = 1000
WARMUP = 2


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def median_ms(fn: Callable[[], object], *, device: str = "cpu", min_reps: int = MIN_REPS,
              min_time_s: float = MIN_TIME_S) -> float:
    """Median milliseconds of one `fn()` (no grad), synchronising the device around each call."""
    times: list[float] = []
    with torch.no_grad():
        for _ in range(WARMUP):
            fn()
        _sync(device)
        start = time.perf_counter()
        while len(times) < MAX_REPS and (len(times) < min_reps or time.perf_counter() - start < min_time_s):
            t0 = time.perf_counter()
            fn()
            _sync(device)
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


ROUNDS = 5
ROUND_TIME_S = 0.04


def interleaved_median_ms(fns: list[Callable[[], object]], *, device: str = "cpu", rounds: int = ROUNDS,
                          round_time_s: float = ROUND_TIME_S) -> list[float]:
    """The median milliseconds of each of `fns`, measured in `rounds` interleaved rounds
    (each fn timed briefly in every round; the median over rounds), so that a change of
    the machine's load during the measurement weighs on all of them alike."""
    per_fn: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for times, fn in zip(per_fn, fns):
            times.append(median_ms(fn, device=device, min_reps=3, min_time_s=round_time_s))
    return [statistics.median(t) for t in per_fn]
