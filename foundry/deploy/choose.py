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
model, with the same kernel; foundry.deploy.elimination). With more than one unit, the model with every kernel in is
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

from foundry.deploy.contenders import EAGER, Contender, contenders_of, time_contenders
from foundry.deploy.elimination import Tries, backward, best_of, forward, modes_to_try

CONFIRM_ROUNDS = 9
CONFIRM_ROUND_S = 0.1
CONFIRM_MIN_GAIN = 0.02  # the deployed model's time must be at most (1 - this) x the original's fastest form


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


def choose(model: nn.Module, build: Callable[[list], list], units: list, inputs: tuple, *, device: str,
           modes: tuple, dispatches=(), elimination_s: float | None = None,
           progress: Callable[[str], None] | None = None) -> Choice:
    """The fastest of the original and the deployed models. `build(swaps)` makes the
    deployed forms holding `swaps`, as [(model, form, swaps in it)], the one with every
    swap first (only that one is also compiled, in each of `modes`). `units` (Unit) are
    given the weakest first: tried in that order by a backward elimination, in the reverse
    by a forward selection, until `elimination_s` is spent (None: no limit). The call
    counts of `dispatches` (RegionDispatch) are left as they were. `progress` is told each
    step (the forms built and compiled, each try, the timings), a line each."""
    calls = [(d.kernel_calls, d.fallback_calls) for d in dispatches]
    try:
        return _choose(model, build, units, inputs, device=device, modes=modes, elimination_s=elimination_s,
                       progress=progress)
    finally:
        for d, (k, f) in zip(dispatches, calls):
            d.kernel_calls, d.fallback_calls = k, f


def _choose(model: nn.Module, build: Callable[[list], list], units: list, inputs: tuple, *, device: str,
            modes: tuple, elimination_s: float | None, progress: Callable[[str], None] | None) -> Choice:
    started = time.monotonic()

    def say(line: Callable[[], str]) -> None:  # the line is made (and the clock read) only when it is told
        if progress is not None:
            progress(f"{line()} ({time.monotonic() - started:.0f} s)")

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

    def keep_only(kept: tuple) -> None:
        for key in [k for k in cache if k != ids(kept)]:
            del cache[key]  # its compiled models are not needed again

    baseline: list = []
    every = tuple(s for u in units for s in u.swaps)
    deployed(every, modes)  # the final timing may need them; a try builds as much again
    say(lambda: f"built the model with every kernel in ({len(every)} region occurrence(s) of {len(units)} task(s)), "
                f"{', '.join(('eager', *modes))}")
    baseline = contenders_of(model, "", (), modes, inputs)
    try_s = time.monotonic() - started  # what the next try is expected to take
    tries = Tries(deployed, keep_only, time_contenders, inputs, device, started, elimination_s, try_s, progress)
    # with one unit, the final timing is its try; with more, the original beside every kernel
    # in says where to start from
    pick = tries.fastest(every, [()])[0] if len(units) > 1 else 0
    if len(units) > 1:
        say(lambda: f"the model with every kernel in was {'faster' if pick == 0 else 'slower'} than the original: "
                    f"{'dropping' if pick == 0 else 'adding'} tasks one at a time")
    if pick == 0:
        current, dropped, replaced, untried = backward(tries, units, every)
    else:
        current, dropped, replaced, untried = forward(tries, list(reversed(units)))
    final = baseline + (deployed(current, modes) if current else [])
    times = time_contenders(final, inputs, device=device)
    winner, _ = best_of(final, times)
    say(lambda: "final timing: " + ", ".join(f"{c.name} {t:.4g} ms" for c, t in zip(final, times)))
    confirmation: tuple = ()
    if winner.form:
        base, _ = best_of(baseline, times[:len(baseline)])
        again = time_contenders([winner, base], inputs, device=device, rounds=CONFIRM_ROUNDS,
                                round_time_s=CONFIRM_ROUND_S)
        confirmation = ((winner.name, again[0]), (base.name, again[1]))
        say(lambda: f"timed again, the two alone: {winner.name} {again[0]:.4g} ms, {base.name} {again[1]:.4g} ms")
        if again[0] > again[1] * (1 - CONFIRM_MIN_GAIN):
            winner = base
    return Choice(winner=winner, timings=tuple((c.name, t) for c, t in zip(final, times)), original_ms=times[0],
                  dropped=tuple(dropped), kept=current, confirmation=confirmation, untried=untried,
                  replaced=tuple(replaced))
