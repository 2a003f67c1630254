"""Seeded input generation for tasks.

Inputs come from the task's own `get_inputs()` with every random generator seeded, so the
judge and a sandbox worker that are given the same `InputSpec` build bit-identical inputs
in separate processes. The "heavy" distribution rescales each floating-point input by a
sign-preserving heavy-tailed factor exp(s*|z|), z ~ N(0, 1): magnitudes spread over
orders of magnitude (kernels that only work for unit-scale values fail), while signs and
positivity are kept, so tasks whose inputs must be positive stay valid.

The global generators are process-wide state: `seeded(seed)` seeds them and holds them
for the calling thread until its draws are done, so that the judge's lanes (threads of
one process) can draw at once without one's draws landing between another's seeding and
its own draws. Every seeded draw here (inputs, init inputs) and the judge's seeded model
construction go through it.

A spec may redraw one input: `InputSpec(seed, redraw=i, redraw_seed=s)` is the input set
of `seed` with input i replaced by input i of the set of `s` (same distribution). The
judge's differential check of an input (foundry/evaluate/README.md, `input_ignored`)
pairs such a trial with the trial of `seed`.
"""

from __future__ import annotations

import random
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import torch

DISTRIBUTIONS = ("standard", "heavy")
HEAVY_SCALE = 1.5


@dataclass(frozen=True)
class InputSpec:
    """Which inputs one trial uses: a seed and a distribution name; `redraw`: the index of
    one input taken from the set of `redraw_seed` instead (None: none)."""

    seed: int
    distribution: str = "standard"
    redraw: int | None = None
    redraw_seed: int = 0

    def __post_init__(self) -> None:
        if self.distribution not in DISTRIBUTIONS:
            raise ValueError(f"unknown input distribution {self.distribution!r} "
                             f"(choose from {', '.join(DISTRIBUTIONS)})")
        if self.redraw is not None and (type(self.redraw) is not int or self.redraw < 0):
            raise ValueError(f"redraw must be an input index (an int >= 0) or None, got {self.redraw!r}")


def with_redraw(spec: InputSpec, draw: Callable[[InputSpec], list]) -> list:
    """`draw(spec)` for a spec without a redraw; else the set of `spec.seed` with input
    `spec.redraw` taken from the set of `spec.redraw_seed`, both drawn by `draw` (the
    donor set first, so that at most one set and one input exist at once)."""
    if spec.redraw is None:
        return draw(spec)
    plain = InputSpec(spec.seed, spec.distribution)
    donor = draw(InputSpec(spec.redraw_seed, spec.distribution))
    if spec.redraw >= len(donor):
        raise IndexError(f"input {spec.redraw} is redrawn, but get_inputs() returns {len(donor)} inputs")
    taken = donor[spec.redraw]
    del donor
    inputs = draw(plain)
    inputs[spec.redraw] = taken
    return inputs


def seed_everything(seed: int) -> None:
    torch.manual_seed(seed)
    random.seed(seed)
    try:
        import numpy as np
        np.random.seed(seed % (2**32))
    except ImportError:  # pragma: no cover - numpy ships with torch
        pass


@contextmanager
def build_device(device: str) -> Iterator[None]:
    """Where a task's modules are constructed: on a GPU, under it as torch's default
    device, so parameters are drawn there by its generator (a multi-GB weight takes
    milliseconds, not seconds of one CPU thread and a copy). The judge's reference and
    every worker build this way from the same seed, so they hold the same values; on the
    CPU nothing changes."""
    if device == "cpu":
        yield
        return
    with torch.device(device):
        yield


_GLOBAL_GENERATORS = threading.RLock()  # torch's (CPU and CUDA), Python's and numpy's


@contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Every global generator seeded with `seed` and held by this thread for the block
    (re-entrant: a seeded block may seed again inside)."""
    with _GLOBAL_GENERATORS:
        seed_everything(seed)
        yield


def trial_plan(n_trials: int, base_seed: int) -> tuple[InputSpec, ...]:
    """`n_trials` specs with distinct seeds; every second trial is heavy-tailed (so any
    plan of two or more trials has at least one)."""
    return tuple(InputSpec(seed=(base_seed + 7919 * i) % (2**62),
                           distribution="heavy" if i % 2 == 1 else "standard")
                 for i in range(n_trials))


def _heavy(x: torch.Tensor, seed: int) -> torch.Tensor:
    gen = torch.Generator(device="cpu").manual_seed(seed ^ 0x5EED)
    z = torch.randn(x.shape, generator=gen, dtype=torch.float32)
    factor = torch.exp(HEAVY_SCALE * z.abs())
    return (x.float() * factor.to(x.device)).to(x.dtype)


def make_inputs(module: Any, spec: InputSpec) -> list:
    """Call the task module's `get_inputs()` under `spec`'s seed and distribution (and
    its redraw)."""
    return with_redraw(spec, lambda s: _make_inputs(module, s))


def _make_inputs(module: Any, spec: InputSpec) -> list:
    with seeded(spec.seed):
        inputs = list(module.get_inputs())
    if spec.distribution == "heavy":
        inputs = [_heavy(x, spec.seed + i) if isinstance(x, torch.Tensor) and x.is_floating_point()
                  else x for i, x in enumerate(inputs)]
    return inputs


def make_init_inputs(module: Any, seed: int) -> list:
    with seeded(seed):
        return list(module.get_init_inputs())


def clone_inputs(inputs: Sequence) -> list:
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
