"""The models `deploy` chooses from, timed end to end in one process, interleaved: the
user's original, `torch.compile` of it, the deployed model in each form and `torch.compile`
of the deployed model (and, on a GPU, both compiled with CUDA graphs:
`mode="reduce-overhead"`, which records the whole forward once per input shape and replays
it; the shapes are static there, the example inputs').

A compiled contender is compiled (and, with CUDA graphs, recorded) by its warm-up calls
before any timing, so compile time is not in its figure. Many contenders share the user's
forward code (the original and copies of it with submodules swapped), so the compiler's
per-code recompile limit is raised while they are compiled: past it torch.compile would
quietly run the model eagerly and the figure would be eager's."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn as nn

from foundry.extract.timing import ROUND_TIME_S, ROUNDS, interleaved_median_ms

EAGER = ""
COMPILE_DEFAULT = "default"  # torch.compile(model)
COMPILE_CUDA_GRAPHS = "reduce-overhead"  # torch.compile(model, mode="reduce-overhead"): CUDA graphs
RECOMPILE_LIMIT = 64
WARMUP_CALLS = 3  # CUDA graph trees warm up once, record on the next call, replay after


@dataclass(frozen=True, eq=False)  # compared by identity: it holds a model
class Contender:
    """One model `deploy` may hand back: `form` "" for the user's original, else the
    deployed form (api.FORM_MODULES / FORM_GRAPH); `compiled` EAGER, COMPILE_DEFAULT or
    COMPILE_CUDA_GRAPHS; `swaps` the region swaps in it (api.Swap)."""

    model: nn.Module
    form: str
    compiled: str
    swaps: tuple = ()

    @property
    def name(self) -> str:
        base = f"deployed ({self.form})" if self.form else "original"
        if self.compiled == COMPILE_DEFAULT:
            return f"torch.compile({base})"
        if self.compiled == COMPILE_CUDA_GRAPHS:
            return f"torch.compile({base}, mode='reduce-overhead')"
        return base


def compile_modes(device: str, with_compile: bool) -> tuple:
    """The compiled forms that apply on `device`: none without `with_compile`, the default
    one, and on a GPU the CUDA-graph one too."""
    if not with_compile:
        return ()
    return (COMPILE_DEFAULT, COMPILE_CUDA_GRAPHS) if device.startswith("cuda") else (COMPILE_DEFAULT,)


@contextmanager
def _recompile_limit():
    config = torch._dynamo.config
    names = [n for n in ("recompile_limit", "cache_size_limit") if hasattr(config, n)]
    old = {n: getattr(config, n) for n in names}
    try:
        for n in names:
            setattr(config, n, max(old[n], RECOMPILE_LIMIT))
        yield
    finally:
        for n, v in old.items():
            setattr(config, n, v)


def compiled(model: nn.Module, mode: str) -> nn.Module:
    """`torch.compile` of `model` in `mode` (COMPILE_DEFAULT: the default mode)."""
    return torch.compile(model) if mode == COMPILE_DEFAULT else torch.compile(model, mode=mode)


def contenders_of(model: nn.Module, form: str, swaps: tuple, modes: tuple, inputs: tuple) -> list:
    """`model` eager and compiled in each of `modes`, each compiled one warmed up on `inputs`."""
    out = [Contender(model=model, form=form, compiled=EAGER, swaps=swaps)]
    for mode in modes:
        c = compiled(model, mode)
        warm_up(c, inputs)
        out.append(Contender(model=c, form=form, compiled=mode, swaps=swaps))
    return out


def warm_up(model: nn.Module, inputs: tuple) -> None:
    with _recompile_limit(), torch.no_grad():
        for _ in range(WARMUP_CALLS):
            model(*inputs)


def time_contenders(contenders: list, inputs: tuple, *, device: str, rounds: int = ROUNDS,
                    round_time_s: float = ROUND_TIME_S) -> list[float]:
    """Each contender's median ms on `inputs`, over `rounds` interleaved rounds."""
    with _recompile_limit():
        return interleaved_median_ms([(lambda m=c.model: m(*inputs)) for c in contenders], device=device,
                                     rounds=rounds, round_time_s=round_time_s)
