"""Which regions go in and which model comes back, decided end to end: a region goes in
only where the model with it is faster than the model without it, each timed in its
fastest form (eager, torch.compile, CUDA graphs where they apply; foundry.deploy.contenders),
interleaved in this process; then the original, torch.compile of it and the deployed
model with the regions kept are timed together and the fastest is handed back.

A kernel faster than its region in eager can still make the model slower: under
torch.compile the region's code is fused with its neighbours by Inductor, while a custom
op is a wall the fusion stops at; in eager the deployed graph runs ops the module did not
and each region adds its launch. So the decision is the whole model's, not the kernel's.

The regions are tried out a task at a time (a `Unit`: every occurrence of the task in the
model, with the same kernel). With more than one unit, the model with every kernel in is
first timed beside the original. Where it is faster, the units are tried weakest kernel
first by backward elimination: drop a unit where the model without it is faster, keep it
otherwise; with one unit left, the model without it is the original, which the final
timing holds. Where it is not, the units are tried strongest first by forward selection:
from the original, a unit goes in where the model with it is faster. (MobileNetV1,
EfficientNetB0 and GoogleNet on an H100, under CUDA graphs: a backward elimination bounded
at 120 s left 5 to 12 of the strongest units untried, and so in, and the models it ended
with ran 18-43% slower than the original under CUDA graphs.) A unit, not an occurrence: one
of 15 occurrences changes the forward by less than the timing's noise on a 2-core CPU,
and there 3_DeepNarrowMLP, tried an occurrence at a time, lost 13 of its 17 regions to
coin flips (13.8 ms in `check`; 6.2 with all 17 in, tried a task at a time). Where a pass
changed anything, the units left are tried again (dropping only), until a pass changes nothing: a unit is timed
beside the others as they are, and they may have changed since its try. A unit whose task
has other kernels (the run's runners-up, foundry.deploy.runinfo) is tried with each of
them too, in the same timing, and the fastest of the models goes on: the kernel that wins
alone is not always the one that wins beside the compiler's code (LeNet5 on a CPU: a ReLU +
max-pool kernel behind torch's convolution won its region alone, 70.9 ms against 89.4 for
the whole region in C, and the model with it lost to torch.compile). Each try compiles a
model, so on a model with dozens of tasks the elimination is bounded by `elimination_s`:
no try starts that would end past it, a try taken to last as long as the one before (the
first: as long as building and compiling the forms with every region, which a try does
once more). In a backward elimination the units not tried stay in (`Choice.untried`); in
a forward selection they stay out (`Choice.dropped`, saying so). The final timing against
the original's forms still decides what comes back.

A deployed model that wins the final timing is timed once more against the fastest of the
original's forms alone, in longer and more rounds (CONFIRM_ROUNDS of CONFIRM_ROUND_S), and
comes back only if it is faster there by at least CONFIRM_MIN_GAIN: on a loaded machine
one short timing can crown a model that is not faster (on a 2-core CPU, ResNetBasicBlock's
deployed model won deploy's round by 7% and then ran 19% slower than torch.compile of the
original in `check`; MobileNetV1's won the confirmation by 0.7% and ran 28% slower in
`check`), and a gain inside the noise is not worth a model with custom ops in it."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import torch.nn as nn

from foundry.deploy.contenders import (COMPILE_CUDA_GRAPHS, COMPILE_DEFAULT, EAGER, Contender, contenders_of,
                                       time_contenders)

CONFIRM_ROUNDS = 9
CONFIRM_ROUND_S = 0.1
CONFIRM_MIN_GAIN = 0.02  # the deployed model's time must be at most (1 - this) x the original's fastest form


@dataclass(frozen=True, eq=False)  # compared by identity: it holds swaps
class Unit:
    """What the elimination tries as one: `swaps`, the occurrences of one task in the model
    with one kernel, and `alternatives`, the same occurrences with each other kernel (each
    a tuple of swaps, in the order of `swaps`)."""

    swaps: tuple
    alternatives: tuple = ()


@dataclass(frozen=True, eq=False)  # compared by identity: it holds models
class Choice:
    """`winner`: the contender handed back; `timings`: (contender name, ms) of the final
    timing; `original_ms`: the eager original's there; `dropped`: (swap, why) per region
    left out by the elimination; `kept`: the swaps in the deployed contenders timed last;
    `confirmation`: (contender name, ms) of the deployed model that won the final timing and
    of the fastest of the original's forms, timed again (empty when no deployed model won);
    the deployed one is the winner only if it was faster there by CONFIRM_MIN_GAIN; `untried`: the
    swaps kept without a try of their own, a backward elimination's time being spent; `replaced`:
    (swap, alternative, why) per swap of a unit whose alternative (the same occurrences
    with another kernel) made the model faster and went in instead."""

    winner: Contender
    timings: tuple
    original_ms: float
    dropped: tuple
    kept: tuple
    confirmation: tuple = ()
    untried: tuple = ()
    replaced: tuple = ()


def modes_to_try(modes: tuple) -> tuple:
    """The compiled forms the elimination's tries build: on a GPU only the CUDA-graph one
    (every form is built for the final timing), so a try compiles once, not twice. On the
    GPU models measured it ran up to 2.7x faster than torch.compile's default mode, and at
    worst 7% slower (25_ShuffleNetUnit on an H100, whose eager deployed graph won): a try
    then still compares each model in the same forms."""
    return tuple(m for m in modes if m != COMPILE_DEFAULT) if COMPILE_CUDA_GRAPHS in modes else modes


def _best(contenders: list, times: list) -> tuple:
    i = min(range(len(times)), key=times.__getitem__)
    return contenders[i], times[i]


def choose(model: nn.Module, build: Callable[[list], list], units: list, inputs: tuple, *, device: str,
           modes: tuple, dispatches=(), elimination_s: float | None = None) -> Choice:
    """The fastest of the original and the deployed models. `build(swaps)` makes the
    deployed forms holding `swaps`, as [(model, form, swaps in it)], the one with every
    swap first (only that one is also compiled, in each of `modes`). `units` (Unit) are
    tried in their order (the weakest first), until `elimination_s` is spent (None: no
    limit). The call counts of `dispatches` (RegionDispatch) are left as they were."""
    calls = [(d.kernel_calls, d.fallback_calls) for d in dispatches]
    try:
        return _choose(model, build, units, inputs, device=device, modes=modes, elimination_s=elimination_s)
    finally:
        for d, (k, f) in zip(dispatches, calls):
            d.kernel_calls, d.fallback_calls = k, f


def _choose(model: nn.Module, build: Callable[[list], list], units: list, inputs: tuple, *, device: str,
            modes: tuple, elimination_s: float | None) -> Choice:
    started = time.monotonic()
    cache: dict = {}  # the contenders of the current set of swaps and of the one tried

    def ids(kept: tuple) -> tuple:
        return tuple(id(s) for s in kept)

    try_modes = modes_to_try(modes)

    def deployed(kept: tuple, wanted: tuple = try_modes) -> list:
        """The contenders of `kept`: eager and compiled in `wanted` (built, or taken from a
        set built with more)."""
        if not kept:
            return baseline  # no swap in: the original's forms
        built, out = cache.get(ids(kept), ((), None))
        if out is None or not set(wanted) <= set(built):
            out = []
            for i, (m, form, inside) in enumerate(build(list(kept))):
                out += contenders_of(m, form, tuple(inside), wanted if i == 0 else (), inputs)
            built = wanted
            cache[ids(kept)] = (built, out)
        return [c for c in out if c.compiled == EAGER or c.compiled in wanted]

    baseline: list = []
    every = tuple(s for u in units for s in u.swaps)
    deployed(every, modes)  # the final timing may need them; a try builds as much again
    baseline = contenders_of(model, "", (), modes, inputs)
    try_s = time.monotonic() - started  # what the next try is expected to take
    tries = _Tries(deployed, cache, ids, inputs, device, started, elimination_s, try_s)
    # with one unit, the final timing is its try; with more, the original beside every kernel
    # in says where to start from
    pick = tries.fastest(every, [()])[0] if len(units) > 1 else 0
    if pick == 0:
        current, dropped, replaced, untried = _backward(tries, units, every)
    else:
        current, dropped, replaced, untried = _forward(tries, list(reversed(units)))
    final = baseline + (deployed(current, modes) if current else [])
    times = time_contenders(final, inputs, device=device)
    winner, _ = _best(final, times)
    confirmation: tuple = ()
    if winner.form:
        base, _ = _best(baseline, times[:len(baseline)])
        again = time_contenders([winner, base], inputs, device=device, rounds=CONFIRM_ROUNDS,
                                round_time_s=CONFIRM_ROUND_S)
        confirmation = ((winner.name, again[0]), (base.name, again[1]))
        if again[0] > again[1] * (1 - CONFIRM_MIN_GAIN):
            winner = base
    return Choice(winner=winner, timings=tuple((c.name, t) for c, t in zip(final, times)), original_ms=times[0],
                  dropped=tuple(dropped), kept=current, confirmation=confirmation, untried=untried,
                  replaced=tuple(replaced))


class _Tries:
    """What the elimination's tries share: the deployed contenders of a set of swaps (built
    and cached), the timing of a try against the current set, and the time bound."""

    def __init__(self, deployed: Callable, cache: dict, ids: Callable, inputs: tuple, device: str, started: float,
                 elimination_s: float | None, try_s: float):
        self.deployed, self.cache, self.ids = deployed, cache, ids
        self.inputs, self.device = inputs, device
        self.started, self.elimination_s, self.try_s = started, elimination_s, try_s
        self.try_started = started

    def out_of_time(self) -> bool:
        """Whether a try started now would end past the bound (taken to last as the last one)."""
        self.try_started = time.monotonic()
        return self.elimination_s is not None and self.try_started - self.started + self.try_s > self.elimination_s

    def fastest(self, current: tuple, candidates: list) -> tuple:
        """Time `current` beside each of `candidates` (sets of swaps): the index of the fastest
        (0: `current`, i: candidates[i - 1]), and the (contender, ms) of the fastest form of
        `current` and of the fastest candidate."""
        sets = [self.deployed(current)] + [self.deployed(kept) for kept in candidates]
        times = time_contenders([c for models in sets for c in models], self.inputs, device=self.device)
        bests, at = [], 0
        for models in sets:
            bests.append(_best(models, times[at:at + len(models)]))
            at += len(models)
        pick = min(range(len(sets)), key=lambda i: bests[i][1])
        best_candidate = pick or min(range(1, len(sets)), key=lambda i: bests[i][1])
        return pick, bests[0], bests[best_candidate]

    def done(self, current: tuple) -> None:
        """Let go of every compiled set but `current`'s; the next try is taken to last as this one."""
        for key in [k for k in self.cache if k != self.ids(current)]:
            del self.cache[key]
        self.try_s = time.monotonic() - self.try_started


def _figures(best: tuple) -> str:
    contender, ms = best
    return f"{ms:.4g} ms ({contender.name})"


def _without(current: tuple, swaps: tuple) -> tuple:
    return tuple(s for s in current if not any(s is t for t in swaps))


def _instead(current: tuple, swaps: tuple, others: tuple) -> tuple:
    by_id = {id(s): o for s, o in zip(swaps, others)}
    return tuple(by_id.get(id(s), s) for s in current)


def _backward(tries: _Tries, units: list, every: tuple) -> tuple:
    """Backward elimination from `every` swap in, the units in their order: (kept, dropped,
    replaced, untried)."""
    current = every
    dropped, replaced = [], []
    untried: tuple = ()
    # (the unit's swaps as they are now in `current`, its alternatives: only on the first pass)
    order = [(u.swaps, u.alternatives) for u in units]
    first, changed = True, True
    while changed and not untried:
        changed = False
        for n, (swaps, alternatives) in enumerate(order):
            # the sets to time against `current`: without the unit (with one left, that is the
            # original, which the final timing holds) and with each of its alternatives instead
            trials = [(None, _without(current, swaps))] if len(current) > len(swaps) else []
            trials += [(alt, _instead(current, swaps, alt)) for alt in alternatives]
            if not trials:
                continue
            if tries.out_of_time():
                untried = tuple(s for swaps_left, _ in order[n:] for s in swaps_left) if first else ()
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
                    order[n] = (alt, ())
                current, changed = kept, True
            tries.done(current)
        if untried:
            break
        # a change alters what every other unit runs beside: the units left are tried again
        order = [(swaps, ()) for swaps, _ in order if any(s is t for t in current for s in swaps)]
        first = False
    return current, dropped, replaced, untried


def _forward(tries: _Tries, units: list) -> tuple:
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
        else:
            current += options[pick - 1]
            if pick > 1:
                why = (f"the model with the other kernel instead was the fastest: {_figures(tried)} vs "
                       f"{_figures(now)} without the task's kernels, timed side by side")
                replaced += [(s, a, why) for s, a in zip(unit.swaps, options[pick - 1])]
        tries.done(current)
    return current, dropped, replaced, ()
