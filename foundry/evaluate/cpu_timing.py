"""The CPU timing protocol (run inside a worker, for candidates and baselines alike).

Warm-up calls until `warmup_ms` has passed (at least 3), an estimate of one call, then
blocks of calls of about `block_ms` each (inputs rotate over the given sets, so a call
cannot return the previous call's buffer and pass), enough blocks for `min_ms` and
`min_calls` (at least 5 blocks). Returns the wall time of every block; the judge takes
the median of the per-call means of the blocks and cross-checks their total against its
own clock. The clock is passed in: the worker captures it before any candidate code runs.
`on_block`, when given, is called before every block to change the inputs (the worker
scales every floating-point input exactly, to 1/2 then 1/4, 1/2, ... of its original, never
back to it), so a candidate that caches its answer by input identity returns stale outputs,
which the judge's recheck of the final outputs catches; `last_input_changes[j]` says how
many changes set j's final output saw. With `on_block`, a block calls each input set once
at most: no timed call repeats an input set its inputs did not change in between, so a
cache that is right after every change (keyed on a buffer and its version counter) never
answers a timed call. Short calls then need more blocks; at most MAX_CHANGED_BLOCKS.
`input_change_ns` is the time the input changes between blocks took, for the judge to
count in its own window (foundry.evaluate.timing_report: at most as much as the blocks).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

MIN_BLOCKS = 5
MAX_CHANGED_BLOCKS = 5000  # blocks of once-per-set calls, each after an input change


def plan_blocks(est_ns: float, params: dict, *, max_per_block: int | None = None) -> tuple[int, int]:
    """(calls per block, number of blocks) for one call taking about `est_ns`; with
    `max_per_block` (the input sets, when the inputs change between blocks) no block has
    more calls than that, and there are at most MAX_CHANGED_BLOCKS."""
    est_ns = max(est_ns, 50.0)
    cap = 100000 if max_per_block is None else max(1, min(100000, int(max_per_block)))
    per_block = max(1, min(cap, int(params["block_ms"] * 1e6 / est_ns)))
    n_blocks = max(MIN_BLOCKS, math.ceil(params["min_calls"] / per_block),
                   math.ceil(params["min_ms"] * 1e6 / (per_block * est_ns)))
    if max_per_block is not None:
        n_blocks = min(n_blocks, MAX_CHANGED_BLOCKS)
    max_calls = int(params["max_calls"])
    if per_block * n_blocks > max_calls:
        per_block = max(1, max_calls // MIN_BLOCKS)
        if max_per_block is not None:
            per_block = min(per_block, cap)
        n_blocks = max(1, min(n_blocks, max_calls // per_block))
    return per_block, n_blocks


def time_forward(call: Callable[[Sequence], Any], input_sets: Sequence[Sequence], *,
                 clock: Callable[[], int], params: dict,
                 synchronize: Callable[[], None] = lambda: None,
                 on_start: Callable[[], None] = lambda: None,
                 on_block: Callable[[], None] | None = None) -> dict:
    n_sets = len(input_sets)
    last: list = [None] * n_sets
    warm = 0
    t0 = clock()
    while warm < 3 or clock() - t0 < params["warmup_ms"] * 1e6:
        last[warm % n_sets] = call(input_sets[warm % n_sets])
        synchronize()
        warm += 1
    est_ns = (clock() - t0) / warm
    per_block, n_blocks = plan_blocks(est_ns, params, max_per_block=n_sets if on_block is not None else None)
    blocks: list[int] = []
    k = 0
    changes = 0
    last_changes = [0] * n_sets
    changing_ns = 0
    on_start()
    for b in range(n_blocks):
        if on_block is not None:
            start = clock()
            on_block()  # change the inputs between blocks (caches keyed on them go stale)
            changing_ns += clock() - start
            changes += 1
        start = clock()
        for _ in range(per_block):
            j = k % n_sets
            last[j] = call(input_sets[j])
            last_changes[j] = changes
            k += 1
        synchronize()
        blocks.append(clock() - start)
    # the final output of each input set, in set order, and how many input changes it saw
    return {"block_ns": blocks, "calls_per_block": per_block, "warmup_calls": warm,
            "estimate_ns": est_ns, "last_outputs": last, "last_input_changes": last_changes,
            "input_change_ns": changing_ns}
