"""Wall-clock time of a callable on the target device: warm-up, then repeated calls until
both a minimum count and a minimum time are reached; the median, in milliseconds.

Each call is timed apart, the device synchronised around it: what one call costs a caller
who waits for its result (a model's forward in `foundry.deploy`). A region of a model
runs inside the forward, behind the calls before it, with no synchronise of its own; its
share of the forward is measured `back_to_back`: on a GPU a sample is a burst of calls
and one synchronise, and its time per call. Timed apart, MobileNetV1's 20 regions on an
H100 took 0.12-0.16 ms a call each and added up to 2.9 times the 1.22 ms forward they
make up."""

from __future__ import annotations

import statistics
import time
from typing import Callable

import torch

MIN_REPS = 5
MIN_TIME_S = 0.2
MAX_REPS = 1000
WARMUP = 2
BURST_S = 0.005  # a back-to-back sample's calls take about this long, synchronise included
MAX_BURST = 100


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def median_ms(fn: Callable[[], object], *, device: str = "cpu", min_reps: int = MIN_REPS,
              min_time_s: float = MIN_TIME_S, back_to_back: bool = False) -> float:
    """Median milliseconds of one `fn()` (no grad), synchronising the device around each
    call; `back_to_back` on a GPU: around each burst of calls (as many as take about
    BURST_S, by the time of one synchronised call), the burst's time per call."""
    times: list[float] = []
    with torch.no_grad():
        for _ in range(WARMUP):
            fn()
        _sync(device)
        burst = 1
        if back_to_back and device.startswith("cuda"):
            t0 = time.perf_counter()
            fn()
            _sync(device)
            burst = max(1, min(MAX_BURST, int(BURST_S / max(time.perf_counter() - t0, 1e-9))))
        start = time.perf_counter()
        while len(times) < MAX_REPS and (len(times) < min_reps or time.perf_counter() - start < min_time_s):
            t0 = time.perf_counter()
            for _ in range(burst):
                fn()
            _sync(device)
            times.append((time.perf_counter() - t0) * 1e3 / burst)
    return statistics.median(times)


ROUNDS = 5
ROUND_TIME_S = 0.04


def interleaved_median_ms(fns: list[Callable[[], object]], *, device: str = "cpu", rounds: int = ROUNDS,
                          round_time_s: float = ROUND_TIME_S, back_to_back: bool = False) -> list[float]:
    """The median milliseconds of each of `fns`, measured in `rounds` interleaved rounds
    (each fn timed briefly in every round; the median over rounds), so that a change of
    the machine's load during the measurement weighs on all of them alike; `back_to_back`
    as in `median_ms`."""
    per_fn: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for times, fn in zip(per_fn, fns):
            times.append(median_ms(fn, device=device, min_reps=3, min_time_s=round_time_s, back_to_back=back_to_back))
    return [statistics.median(t) for t in per_fn]
