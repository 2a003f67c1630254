"""choose starts from no kernel in where the model with every kernel in is slower than the
original (a GPU model under CUDA graphs, where most kernels lose to the compiler's code): it
adds the strongest first, and whatever the elimination time leaves untried stays out."""

from __future__ import annotations

from dataclasses import dataclass

import torch

import foundry.deploy.choose as choose

EFFECT = {"strong": -0.2, "middle": 0.3, "middle2": -0.05, "weak": 0.5}  # ms each kernel adds to 1.0


@dataclass(frozen=True, eq=False)
class Named:
    name: str


def _run(monkeypatch, elimination_s=None):
    tried = []

    def clock(cs, inputs, **k):
        tried.append([tuple(s.name for s in c.swaps) for c in cs])
        return [1.0 + sum(EFFECT[s.name] for s in c.swaps) for c in cs]

    monkeypatch.setattr(choose, "time_contenders", clock)
    weak, middle, middle2, strong = (Named(n) for n in ("weak", "middle", "middle2", "strong"))
    units = [choose.Unit(swaps=(weak,)), choose.Unit(swaps=(middle,), alternatives=((middle2,),)),
             choose.Unit(swaps=(strong,))]  # the weakest first, as deploy gives them
    build = lambda kept: [(torch.nn.Identity(), "graph", kept)]  # noqa: E731
    got = choose.choose(torch.nn.Identity(), build, units, (torch.ones(1),), device="cpu", modes=(),
                        elimination_s=elimination_s)
    return got, tried, (weak, middle, middle2, strong)


def test_the_strongest_kernels_are_added_one_at_a_time_where_they_make_the_model_faster(monkeypatch):
    got, tried, (weak, middle, middle2, strong) = _run(monkeypatch)
    assert tried[0] == [("weak", "middle", "strong"), ()]  # 1.6 ms against the original's 1.0
    assert tried[1] == [(), ("strong",)]
    assert tried[2] == [("strong",), ("strong", "middle"), ("strong", "middle2")]
    assert tried[3] == [("strong", "middle2"), ("strong", "middle2", "weak")]
    assert got.kept == (strong, middle2) and got.untried == ()
    assert [(s, a) for s, a, _ in got.replaced] == [(middle, middle2)]
    assert [s for s, _ in got.dropped] == [weak] and "without it was faster" in got.dropped[0][1]
    assert got.winner.swaps == (strong, middle2)


def test_kernels_the_elimination_time_leaves_untried_stay_out(monkeypatch):
    # started 0; every kernel's forms built by 10; the first try 10-30; the next would end past 50
    readings = [0.0, 10.0, 10.0, 30.0, 35.0]
    monkeypatch.setattr(choose.time, "monotonic", lambda: readings.pop(0) if len(readings) > 1 else readings[0])
    got, _, (weak, middle, _, strong) = _run(monkeypatch, elimination_s=50.0)
    assert got.kept == (strong,) and got.untried == ()
    assert [s for s, _ in got.dropped] == [middle, weak]
    assert all(why.startswith("not tried in the elimination time") for _, why in got.dropped)


def test_a_kernel_is_ranked_by_its_speedup_over_the_faster_of_eager_and_torch_compile():
    """EfficientNetB0 on an H100: a conv + BatchNorm kernel 1.83x over torch.compile of its
    region but 0.42x of eager ranks below one 1.51x over torch.compile and 1.71x over eager."""
    from foundry.deploy.runinfo import BestKernel

    def kernel(eager, compiled):
        return BestKernel(task_id="t", path="p", candidate_id="c", speedup_eager=eager, speedup_compile=compiled,
                          device="cuda")

    assert kernel(0.42, 1.83).speedup_over_faster == 0.42
    assert kernel(1.71, 1.51).speedup_over_faster == 1.51
    assert kernel(1.2, None).speedup_over_faster == 1.2
