"""Compare a deployed model with the original on fresh inputs: the largest error, and the
end-to-end time of the original in eager mode, of torch.compile of the original and of
the deployed model (and, asked for, of torch.compile's max-autotune mode), measured in the
same process on the same inputs, in interleaved rounds (a change of the machine's load
weighs on all of them alike)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn

from foundry.deploy.contenders import COMPILE_CUDA_GRAPHS
from foundry.extract.timing import interleaved_median_ms


@dataclass(frozen=True)
class CheckResult:
    max_abs_err: float
    eager_ms: float
    compile_ms: float | None
    deployed_ms: float
    # calls that ran a swapped-in kernel, or its fallback, during the timed runs (all of them
    # timed together); None where they cannot be counted: a CUDA-graph form replays its
    # recorded forward without running any Python
    kernel_calls: int | None
    fallback_calls: int | None
    threads: int
    max_autotune_ms: float | None = None  # torch.compile(original, mode="max-autotune"), where asked for

    @property
    def speedup_eager(self) -> float:
        return self.eager_ms / self.deployed_ms

    @property
    def speedup_compile(self) -> float | None:
        return None if self.compile_ms is None else self.compile_ms / self.deployed_ms


def _flat(out) -> list:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    if isinstance(out, dict):
        return [t for k in sorted(out) for t in _flat(out[k])]
    return []


def max_error(a, b) -> float:
    fa, fb = _flat(a), _flat(b)
    if len(fa) != len(fb) or any(x.shape != y.shape for x, y in zip(fa, fb)):
        return float("inf")
    return max((float((x.double() - y.double()).abs().max()) for x, y in zip(fa, fb) if x.numel()), default=0.0)


def check(original: nn.Module, deployed: nn.Module, inputs: tuple, *, with_compile: bool = True,
          max_autotune: bool = False) -> CheckResult:
    """`max_autotune`: time torch.compile's max-autotune mode of the original too (its
    compile takes minutes on large models)."""
    device = str(inputs[0].device)
    with torch.no_grad():
        err = max_error(original(*inputs), deployed(*inputs))
    info = getattr(deployed, "foundry_deploy", None)
    before = [(d.kernel_calls, d.fallback_calls) for d in info.dispatches] if info else []
    fns = [lambda: deployed(*inputs), lambda: original(*inputs)]
    if with_compile:
        compiled = torch.compile(original)
        with torch.no_grad():
            compiled(*inputs)
        fns.append(lambda: compiled(*inputs))
    if max_autotune:
        autotuned = torch.compile(original, mode="max-autotune")
        with torch.no_grad():
            autotuned(*inputs)
        fns.append(lambda: autotuned(*inputs))
    deployed_ms, eager_ms, *rest = interleaved_median_ms(fns, device=device)
    compile_ms = rest.pop(0) if with_compile else None
    max_autotune_ms = rest.pop(0) if max_autotune else None
    after = [(d.kernel_calls, d.fallback_calls) for d in info.dispatches] if info else []
    kernel: int | None = sum(a[0] - b[0] for a, b in zip(after, before))
    fallback: int | None = sum(a[1] - b[1] for a, b in zip(after, before))
    if info is not None and info.compiled == COMPILE_CUDA_GRAPHS:
        kernel = fallback = None
    return CheckResult(max_abs_err=err, eager_ms=eager_ms, compile_ms=compile_ms, deployed_ms=deployed_ms,
                       kernel_calls=kernel, fallback_calls=fallback, threads=torch.get_num_threads(),
                       max_autotune_ms=max_autotune_ms)
