"""`foundry.deploy.check`: the largest error and the interleaved end-to-end times."""

from __future__ import annotations

import torch
import torch.nn as nn

from foundry.deploy.check import check


class _Slower(nn.Module):
    """The same function as the original, computed with extra work."""

    def __init__(self, original: nn.Module):
        super().__init__()
        self.original = original

    def forward(self, x):
        y = self.original(x)
        for _ in range(20):
            y = y + 0.0 * torch.tanh(y)
        return y


def test_check_times_every_form_asked_for_and_finds_no_error_in_the_same_function():
    torch.manual_seed(0)
    original = nn.Sequential(nn.Linear(16, 16), nn.ReLU())
    inputs = (torch.randn(8, 16),)
    r = check(original, _Slower(original), inputs, max_autotune=True)
    assert r.max_abs_err == 0.0
    assert r.compile_ms is not None and r.max_autotune_ms is not None and r.max_autotune_ms > 0
    assert r.deployed_ms > r.eager_ms  # twenty more pointwise passes, timed in the same rounds
    plain = check(original, original, inputs, with_compile=False)
    assert plain.compile_ms is None and plain.max_autotune_ms is None and plain.speedup_compile is None


def test_a_different_function_shows_as_an_error():
    original = nn.Linear(4, 4)
    other = nn.Linear(4, 4)
    r = check(original, other, (torch.ones(2, 4),), with_compile=False)
    assert r.max_abs_err > 0


class _Counted(nn.Module):
    """A deployed model's stand-in: one swapped region whose dispatch counts its calls, and
    `compiled` the form deploy returned."""

    def __init__(self, original: nn.Module, compiled: str):
        super().__init__()
        from types import SimpleNamespace
        self.original = original
        self.region = SimpleNamespace(kernel_calls=0, fallback_calls=0)
        self.foundry_deploy = SimpleNamespace(compiled=compiled, dispatches=(self.region,))

    def forward(self, x):
        self.region.kernel_calls += 1
        return self.original(x)


def test_kernel_calls_are_counted_except_in_a_cuda_graph_form():
    from foundry.deploy.contenders import COMPILE_CUDA_GRAPHS
    original = nn.Linear(4, 4)
    inputs = (torch.ones(2, 4),)
    eager = check(original, _Counted(original, ""), inputs, with_compile=False)
    assert eager.kernel_calls is not None and eager.kernel_calls >= 1 and eager.fallback_calls == 0
    # a CUDA graph's replays run no Python: a count of 0 there would claim the kernel never ran
    graphs = check(original, _Counted(original, COMPILE_CUDA_GRAPHS), inputs, with_compile=False)
    assert graphs.kernel_calls is None and graphs.fallback_calls is None
