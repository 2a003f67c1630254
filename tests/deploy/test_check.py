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
