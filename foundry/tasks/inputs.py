"""Seeded input generation for tasks.

Inputs come from the task's own `get_inputs()` with every random generator seeded, so the
judge and a sandbox worker that are given the same `InputSpec` build bit-identical inputs
in separate processes. The "heavy" distribution rescales each floating-point input by a
sign-preserving heavy-tailed factor exp(s*|z|), z ~ N(0, 1): magnitudes spread over
orders of magnitude (kernels that only work for unit-scale values fail), while signs and
positivity are kept, so tasks whose inputs must be positive stay valid.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Sequence

import torch

DISTRIBUTIONS = ("standard", "heavy")
HEAVY_SCALE = 1.5


@dataclass(frozen=True)
class InputSpec:
    """Which inputs one trial uses: a seed and a distribution name."""

    seed: int
    distribution: str = "standard"

    def __post_init__(self) -> None:
        if self.distribution not in DISTRIBUTIONS:
            raise ValueError(f"unknown input distribution {self.distribution!r} "
                             f"(choose from {', '.join(DISTRIBUTIONS)})")


def seed_everything(seed: int) -> None:
    torch.manual_seed(seed)
    random.seed(seed)
    try:
        import numpy as np
        np.random.seed(seed % (2**32))
    except ImportError:  # pragma: no cover - numpy ships with torch
        pass


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
    """Call the task module's `get_inputs()` under `spec`'s seed and distribution."""
    seed_everything(spec.seed)
    inputs = list(module.get_inputs())
    if spec.distribution == "heavy":
        inputs = [_heavy(x, spec.seed + i) if isinstance(x, torch.Tensor) and x.is_floating_point()
                  else x for i, x in enumerate(inputs)]
    return inputs


def make_init_inputs(module: Any, seed: int) -> list:
    seed_everything(seed)
    return list(module.get_init_inputs())


def clone_inputs(inputs: Sequence) -> list:
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
