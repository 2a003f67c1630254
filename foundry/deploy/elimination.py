"""The elimination's tries (foundry.deploy.choose decides with them): which regions of a
model go in, a task at a time (a `Unit`), by backward elimination from every kernel in or
by forward selection from none, each try timing the deployed models it builds beside the
current ones, within a time bound."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from foundry.deploy.contenders import COMPILE_CUDA_GRAPHS, COMPILE_DEFAULT


@dataclass(frozen=True, eq=False)  # compared by identity: it holds swaps
class Unit:
    """What the elimination tries as one: `swaps`, the occurrences of one task in the model
    with one kernel, and `alternatives`, the same occurrences with each other kernel (each
    a tuple of swaps, in the order of `swaps`)."""

    swaps: tuple
    alternatives: tuple = ()
    label: str = ""  # what progress lines call it (its task, its kernel's strategy)


def best_of(contenders: list, times: list) -> tuple:
    """The fastest of `contenders` and its time, `times` being theirs."""
    i = min(range(len(times)), key=times.__getitem__)
    return contenders[i], times[i]


def modes_to_try(modes: tuple) -> tuple:
    """The compiled forms the elimination's tries build: on a GPU only the CUDA-graph one
    (every form is built for the final timing), so a try compiles once, not twice. On the
    GPU models measured it ran up to 2.7x faster than torch.compile's default mode, and at
    worst 7% slower (25_ShuffleNetUnit on an H100, whose eager deployed graph won): a try
    then still compares each model in the same forms."""
    return tuple(m for m in modes if m != COMPILE_DEFAULT) if COMPILE_CUDA_GRAPHS in modes else modes


class Tries:
    """What the elimination's tries share: the deployed contenders of a set of swaps
    (`deployed(kept)`, built once and kept until `keep_only(current)` lets go of every set
    but `current`'s), their timing (`timer`: contenders.time_contenders' signature) against
    the current set, and the time bound."""

    def __init__(self, deployed: Callable, keep_only: Callable, timer: Callable, inputs: tuple, device: str,
                 started: float, elimination_s: float | None, try_s: float,
                 progress: Callable[[str], None] | None = None):
        self.deployed, self.keep_only, self.timer = deployed, keep_only, timer
        self.inputs, self.device = inputs, device
        self.started, self.elimination_s, self.try_s = started, elimination_s, try_s
        self.try_started = started
        self.progress = progress  # told each try's outcome, one line (None: nothing is told)

    def tell(self, n: int, of: int, label: str, outcome: str) -> None:
        """One progress line for the try of unit `n` (from 1) of `of`, `label`, which ended in `outcome`."""
        if self.progress is None:
            return
        bound = "" if self.elimination_s is None else f" of {self.elimination_s:.0f}"
        self.progress(f"try {n}/{of} ({time.monotonic() - self.started:.0f} s{bound}): {label or 'a task'}: {outcome}")

    def out_of_time(self) -> bool:
        """Start a try's clock, and say whether the try would end past the bound (a try is
        taken to last as long as the last one did)."""
        self.try_started = time.monotonic()
        return self.elimination_s is not None and self.try_started - self.started + self.try_s > self.elimination_s

    def fastest(self, current: tuple, candidates: list) -> tuple:
        """Time `current` beside each of `candidates` (sets of swaps): the index of the fastest
        (0: `current`, i: candidates[i - 1]), and the (contender, ms) of the fastest form of
        `current` and of the fastest candidate."""
        sets = [self.deployed(current)] + [self.deployed(kept) for kept in candidates]
        times = self.timer([c for models in sets for c in models], self.inputs, device=self.device)
        bests, at = [], 0
        for models in sets:
            bests.append(best_of(models, times[at:at + len(models)]))
            at += len(models)
        pick = min(range(len(sets)), key=lambda i: bests[i][1])
        best_candidate = pick or min(range(1, len(sets)), key=lambda i: bests[i][1])
        return pick, bests[0], bests[best_candidate]

    def done(self, current: tuple) -> None:
        """Let go of every compiled set but `current`'s; the next try is taken to last as this one."""
        self.keep_only(current)
        self.try_s = time.monotonic() - self.try_started


def _figures(best: tuple) -> str:
    contender, ms = best
    return f"{ms:.4g} ms ({contender.name})"


def _without(current: tuple, swaps: tuple) -> tuple:
    return tuple(s for s in current if not any(s is t for t in swaps))


def _instead(current: tuple, swaps: tuple, others: tuple) -> tuple:
    by_id = {id(s): o for s, o in zip(swaps, others)}
    return tuple(by_id.get(id(s), s) for s in current)


def backward(tries: Tries, units: list, every: tuple) -> tuple:
    """Backward elimination from `every` swap in, the units in their order: (kept, dropped,
    replaced, untried)."""
    current = every
    dropped, replaced = [], []
    untried: tuple = ()
    # (the unit's swaps as they are now in `current`, its alternatives: only on the first pass)
    order = [(u.swaps, u.alternatives, u.label) for u in units]
    first, changed = True, True
    while changed and not untried:
        changed = False
        for n, (swaps, alternatives, label) in enumerate(order):
            # the sets to time against `current`: without the unit (with one left, that is the
            # original, which the final timing holds) and with each of its alternatives instead
            trials = [(None, _without(current, swaps))] if len(current) > len(swaps) else []
            trials += [(alt, _instead(current, swaps, alt)) for alt in alternatives]
            if not trials:
                continue
            if tries.out_of_time():
                untried = tuple(s for swaps_left, *_ in order[n:] for s in swaps_left) if first else ()
                break
            pick, now, tried = tries.fastest(current, [kept for _, kept in trials])
            if pick:
                alt, kept = trials[pick - 1]
                what = "without it" if alt is None else "with the other kernel instead"
                why = f"the model {what} was faster: {_figures(tried)} vs {_figures(now)} with it, timed side by side"
                if alt is None:
                    dropped += [(s, why) for s in swaps]
                else:
                    replaced += [(s, a, why) for s, a in zip(swaps, alt)]
                    order[n] = (alt, (), label)
                current, changed = kept, True
                outcome = "out" if alt is None else "another of its kernels in instead"
                tries.tell(n + 1, len(order), label, f"{outcome}: {_figures(tried)} {what}, {_figures(now)} with it")
            else:
                tries.tell(n + 1, len(order), label, f"kept: {_figures(now)} with it, {_figures(tried)} otherwise")
            tries.done(current)
        if untried:
            break
        # a change alters what every other unit runs beside: the units left are tried again
        order = [(swaps, (), label) for swaps, _, label in order if any(s is t for t in current for s in swaps)]
        first = False
    # a runner-up that went in and was dropped on a later pass is in `dropped`, not in the model
    replaced = [(s, a, why) for s, a, why in replaced if any(a is t for t in current)]
    return current, dropped, replaced, untried


def forward(tries: Tries, units: list) -> tuple:
    """Forward selection from no swap in, the units in their order (the strongest first): a
    unit goes in, with its kernel or one of its alternatives, where the model with it is the
    fastest; (kept, dropped, replaced, untried), the units not tried left out, in `dropped`."""
    current: tuple = ()
    dropped, replaced = [], []
    for n, unit in enumerate(units):
        if tries.out_of_time():
            why = ("not tried in the elimination time: the model with every kernel in was slower than the original, "
                   "so a kernel goes in only where a try found the model faster with it")
            dropped += [(s, why) for u in units[n:] for s in u.swaps]
            break
        options = [unit.swaps, *unit.alternatives]
        pick, now, tried = tries.fastest(current, [current + o for o in options])
        if not pick:
            dropped += [(s, f"the model without it was faster: {_figures(now)} vs {_figures(tried)} with it, "
                            "timed side by side") for s in unit.swaps]
            tries.tell(n + 1, len(units), unit.label,
                       f"left out: {_figures(now)} without it, {_figures(tried)} with it")
        else:
            tries.tell(n + 1, len(units), unit.label, f"in: {_figures(tried)} with it, {_figures(now)} without it")
            current += options[pick - 1]
            if pick > 1:
                why = (f"the model with the other kernel instead was the fastest: {_figures(tried)} vs "
                       f"{_figures(now)} without the task's kernels, timed side by side")
                replaced += [(s, a, why) for s, a in zip(unit.swaps, options[pick - 1])]
        tries.done(current)
    return current, dropped, replaced, ()
