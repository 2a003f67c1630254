"""Turning a worker's timing message into a runtime, and cross-checking it against the
judge's own clock (the worker's numbers come from a process that ran candidate code)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

# the worker's timed total may fall short of the judge's observed window by at most this
# fraction plus a fixed allowance (message passing, packing the final outputs)
HIDDEN_FRACTION = 0.3
FIXED_ALLOWANCE_MS = 25.0
# the median block may not be far below the mean block (work hidden in a few blocks): below
# CONSERVATIVE_BELOW x mean the runtime is taken as the mean (noisy machines do that), below
# MEDIAN_TO_MEAN_MIN x mean it is flagged (no honest run is that skewed)
CONSERVATIVE_BELOW = 0.5
MEDIAN_TO_MEAN_MIN = 0.1


@dataclass(frozen=True)
class TimingVerdict:
    runtime_ms: float | None
    spread: float | None
    flags: tuple = ()
    reason: str = ""
    metrics: dict = field(default_factory=dict)


def _quantile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def analyze(header: dict, *, started_at: float | None, ended_at: float) -> TimingVerdict:
    blocks = header.get("block_ns")
    per = header.get("calls_per_block")
    if (not isinstance(blocks, list) or not blocks or type(per) is not int or per < 1
            or not all(isinstance(b, (int, float)) and b >= 0 for b in blocks)):
        return TimingVerdict(None, None, ("timing_mismatch",), "malformed timing report")
    means_ms = [b / per / 1e6 for b in blocks]
    median = statistics.median(means_ms)
    total_ms = sum(blocks) / 1e6
    calls = per * len(blocks)
    metrics = {"timing_blocks": len(blocks), "timing_calls": calls, "worker_total_ms": total_ms}
    flags, reason = [], ""
    span = header.get("span_ns")  # the worker's whole timed loop (GPU: flushes, syncs)
    window_total_ms = total_ms
    if isinstance(span, (int, float)) and span >= sum(blocks) * 0.999:
        window_total_ms = span / 1e6
    changing = header.get("input_change_ns")  # CPU: the input changes between blocks
    if isinstance(changing, (int, float)) and not isinstance(changing, bool) and changing > 0:
        # counted up to the blocks' own total: a report that hides time in it gains 2x at most
        window_total_ms += min(float(changing), float(sum(blocks))) / 1e6
    if started_at is None:
        flags.append("timing_mismatch")
        reason = "the worker never announced the start of its timed runs"
    else:
        window_ms = (ended_at - started_at) * 1000
        metrics["judge_window_ms"] = window_ms
        # (a report longer than the window only makes the candidate look slower; the judge's
        # view of the window's start can lag on a busy machine, so that is not flagged)
        if window_total_ms < window_ms * (1 - HIDDEN_FRACTION) - FIXED_ALLOWANCE_MS:
            flags.append("timing_mismatch")
            reason = (f"worker reports {window_total_ms:.1f} ms of runs but took {window_ms:.1f} ms "
                      f"by the judge's clock")
    mean = total_ms / calls
    spread = (_quantile(means_ms, 0.9) - _quantile(means_ms, 0.1)) / median if median > 0 else None
    if median < MEDIAN_TO_MEAN_MIN * mean:
        flags.append("timing_mismatch")
        reason = reason or f"median block {median:.4g} ms is far below the mean {mean:.4g} ms"
    runtime = median
    if median < CONSERVATIVE_BELOW * mean:
        metrics["runtime_from_mean"] = True
        runtime = mean
    return TimingVerdict(runtime, spread, tuple(dict.fromkeys(flags)), reason, metrics)
