"""foundry.deploy.choose and its elimination (foundry.deploy.elimination) on scripted
timings: the order units are tried in, backward elimination from every kernel in, forward
selection from none where every kernel in is slower than the original, runners-up tried
in a unit's place, the time bound, the forms a try builds."""

from __future__ import annotations

from dataclasses import dataclass

import torch

import foundry.deploy.choose as choose
from foundry.deploy.elimination import Unit, modes_to_try


@dataclass(frozen=True, eq=False)
class Named:
    """A stand-in swap for choose: a name."""

    name: str


def one_each(*swaps) -> list:
    """A choose.Unit per swap."""
    return [Unit(swaps=(s,)) for s in swaps]


def test_the_elimination_tries_the_weakest_kernel_first(monkeypatch):
    """choose tries the swaps in the order given (deploy gives the lowest judged speedup
    first) and starts no try that would end past elimination_s, a try taken to last as long
    as the one before."""
    tried = []

    def clock(cs, inputs, **k):
        tried.append(tuple(tuple(s.name for s in c.swaps) for c in cs))
        # each swap slows the model (every try drops one), but the original is slower still
        return [2.0 if not c.swaps else 1.0 + 0.1 * len(c.swaps) for c in cs]

    monkeypatch.setattr(choose, "time_contenders", clock)
    build = lambda kept: [(torch.nn.Identity(), "graph", kept)]  # noqa: E731
    weak, middle, strong = Named("weak"), Named("middle"), Named("strong")
    got = choose.choose(torch.nn.Identity(), build, one_each(weak, middle, strong), (torch.ones(1),), device="cpu",
                        modes=())
    assert tried[0] == (("weak", "middle", "strong"), ())  # every kernel in beside the original
    assert tried[1] == (("weak", "middle", "strong"), ("middle", "strong"))
    assert tried[2] == (("middle", "strong"), ("strong",))
    assert got.dropped == ((weak, got.dropped[0][1]), (middle, got.dropped[1][1]))
    assert got.kept == (strong,) and got.untried == ()
    tried.clear()
    # started 0; every swap built and compiled by 10; the first try 10-30; the second would
    # start at 35 and, taking 20 s as the first did, end at 55: past the bound of 50
    readings = [0.0, 10.0, 10.0, 30.0, 35.0]
    monkeypatch.setattr(choose.time, "monotonic", lambda: readings.pop(0) if len(readings) > 1 else readings[0])
    got = choose.choose(torch.nn.Identity(), build, one_each(weak, middle, strong), (torch.ones(1),), device="cpu",
                        modes=(), elimination_s=50.0)
    assert [s for s, _ in got.dropped] == [weak] and got.untried == (middle, strong)
    readings[:] = [0.0, 45.0, 45.0]  # building every swap took 45 s: a first try would end at 90
    got = choose.choose(torch.nn.Identity(), build, one_each(weak, middle, strong), (torch.ones(1),), device="cpu",
                        modes=(), elimination_s=50.0)
    assert not got.dropped and got.untried == (weak, middle, strong)


def test_choose_tries_each_alternative_beside_dropping_the_swap(monkeypatch):
    tried = []
    a, a2, b = Named("a"), Named("a2"), Named("b")
    units = [Unit(swaps=(a,), alternatives=((a2,),)), Unit(swaps=(b,))]

    def clock(cs, inputs, **k):
        tried.append([tuple(s.name for s in c.swaps) for c in cs])
        return [2.0 if not c.swaps else 1.0 - 0.3 * ("a2" in [s.name for s in c.swaps]) + 0.1 * len(c.swaps)
                for c in cs]  # the original slowest: the elimination starts with every kernel in

    monkeypatch.setattr(choose, "time_contenders", clock)
    build = lambda kept: [(torch.nn.Identity(), "graph", kept)]  # noqa: E731
    got = choose.choose(torch.nn.Identity(), build, units, (torch.ones(1),), device="cpu", modes=())
    assert tried[0] == [("a", "b"), ()]  # every kernel in beside the original
    assert tried[1] == [("a", "b"), ("b",), ("a2", "b")]
    assert [(s.name, alt.name) for s, alt, _ in got.replaced] == [("a", "a2")]
    assert tried[2] == [("a2", "b"), ("a2",)]  # b: dropped, its model without it faster
    assert [s.name for s, _ in got.dropped] == ["b"] and [s.name for s in got.kept] == ["a2"]


def test_a_region_kept_beside_a_kernel_since_replaced_is_tried_again(monkeypatch):
    """LeNet5's case: the weak region (c2) pays only beside region c1's first kernel, which
    a runner-up (c1b) replaces later in the same pass; the next pass drops c2."""
    c1b, c2, c1 = Named("c1b"), Named("c2"), Named("c1")
    units = [Unit(swaps=(c2,)), Unit(swaps=(c1,), alternatives=((c1b,),))]

    def ms(names: set) -> float:
        if not names:
            return 4.0  # the original: slower than with every kernel in
        effect = {"c1": 1.0, "c1b": -0.5}
        return 2.0 + sum(effect.get(n, 0.0) for n in names) + ("c2" in names) * (-0.1 if "c1" in names else 0.2)

    monkeypatch.setattr(choose, "time_contenders", lambda cs, inputs, **k: [ms({s.name for s in c.swaps}) for c in cs])
    build = lambda kept: [(torch.nn.Identity(), "graph", kept)]  # noqa: E731
    got = choose.choose(torch.nn.Identity(), build, units, (torch.ones(1),), device="cpu", modes=())
    assert [(s.name, alt.name) for s, alt, _ in got.replaced] == [("c1", "c1b")]
    assert [s.name for s, _ in got.dropped] == ["c2"] and got.kept == (c1b,)


def test_the_occurrences_of_a_task_are_tried_together(monkeypatch):
    """A task's occurrences (a unit) are dropped or replaced together, each of them named in
    `dropped` or `replaced`."""
    tried = []
    x1, x2, x3, y1, y2, y1b, y2b = (Named(n) for n in ("x1", "x2", "x3", "y1", "y2", "y1b", "y2b"))

    def clock(cs, inputs, **k):
        tried.append([tuple(s.name for s in c.swaps) for c in cs])
        return [1.0 + 2.0 * (not c.swaps) + sum({"x": 0.1, "y": -0.1}[s.name[0]] - 0.15 * s.name.endswith("b")
                                                for s in c.swaps) for c in cs]

    monkeypatch.setattr(choose, "time_contenders", clock)
    build = lambda kept: [(torch.nn.Identity(), "graph", kept)]  # noqa: E731
    units = [Unit(swaps=(x1, x2, x3)), Unit(swaps=(y1, y2), alternatives=((y1b, y2b),))]
    got = choose.choose(torch.nn.Identity(), build, units, (torch.ones(1),), device="cpu", modes=())
    assert tried[0] == [("x1", "x2", "x3", "y1", "y2"), ()]
    assert tried[1] == [("x1", "x2", "x3", "y1", "y2"), ("y1", "y2")]
    assert tried[2] == [("y1", "y2"), ("y1b", "y2b")]  # alone: only its alternative to try
    assert [s.name for s, _ in got.dropped] == ["x1", "x2", "x3"]
    assert [(s.name, a.name) for s, a, _ in got.replaced] == [("y1", "y1b"), ("y2", "y2b")]
    assert got.kept == (y1b, y2b)
    # no second pass (one unit left, without alternatives): the final timing, its confirmation
    assert tried[3:] == [[(), ("y1b", "y2b")], [("y1b", "y2b"), ()]]


# forward selection
EFFECT = {"strong": -0.2, "middle": 0.3, "middle2": -0.05, "weak": 0.5}  # ms each kernel adds to 1.0


def _run(monkeypatch, elimination_s=None):
    tried = []

    def clock(cs, inputs, **k):
        tried.append([tuple(s.name for s in c.swaps) for c in cs])
        return [1.0 + sum(EFFECT[s.name] for s in c.swaps) for c in cs]

    monkeypatch.setattr(choose, "time_contenders", clock)
    weak, middle, middle2, strong = (Named(n) for n in ("weak", "middle", "middle2", "strong"))
    units = [Unit(swaps=(weak,)), Unit(swaps=(middle,), alternatives=((middle2,),)),
             Unit(swaps=(strong,))]  # the weakest first, as deploy gives them
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


def test_on_a_gpu_a_kernel_is_ranked_and_let_in_by_its_speedups_by_cuda_event_time(tmp_path):
    """MobileNetV1 on an H100: a depthwise kernel judged at 0.087 ms a call (launch-bound:
    its back-to-back time), 0.51x of eager's 0.044, ran 0.027 ms on the GPU. Inside a CUDA
    graph only the GPU time counts, so that is what ranks it, and a kernel faster than a
    baseline by it is tried in the model."""
    import dataclasses
    import json

    from foundry.deploy.runinfo import BestKernel, deployable_kernel, faster_than_a_baseline
    from foundry.store.evallog import EvaluationRecord
    from foundry.types import Candidate, EvalResult, Stage
    gpu = BestKernel(task_id="t", path="p", candidate_id="c", speedup_eager=0.51, speedup_compile=0.93,
                     device="cuda", gpu_speedup_eager=1.4, gpu_speedup_compile=1.2)
    assert gpu.speedup_over_faster == 1.2
    cand = Candidate.make(task_id="t", backend="triton", source="x = 1")
    result = EvalResult(candidate_id=cand.candidate_id, task_id="t", stage=Stage.CORRECT, correct=True,
                        runtime_ms=0.087, eager_ms=0.044, compile_ms=0.081, speedup_eager=0.51, speedup_compile=0.93,
                        device="cuda", metrics={"gpu_speedup": {"eager": 1.4, "compile": None}})
    found = deployable_kernel(EvaluationRecord(candidate=cand, result=result, eval_id="e", seq=1), "p", "x = 1", {})
    assert (found.gpu_speedup_eager, found.gpu_speedup_compile) == (1.4, None) and found.speedup_over_faster == 1.4
    json.dumps(result.metrics)  # as the run's log keeps it
    # slower than both baselines by the judged times, faster than eager's by GPU time: worth a try in the model
    assert faster_than_a_baseline(result)
    assert not faster_than_a_baseline(dataclasses.replace(result, metrics={}))
    assert not faster_than_a_baseline(dataclasses.replace(result, metrics={"gpu_speedup": {"eager": 0.9,
                                                                                           "compile": 0.8}}))


def test_on_a_gpu_a_try_builds_only_the_cuda_graph_form_and_the_final_timing_every_form(monkeypatch):
    """A try compiles its models once (CUDA graphs), not twice; the model handed back is
    still chosen among every form, torch.compile's default mode included."""
    from foundry.deploy.contenders import COMPILE_CUDA_GRAPHS, COMPILE_DEFAULT, Contender
    built = []

    def contenders_of(model, form, swaps, modes, inputs):
        built.append((tuple(s.name for s in swaps), tuple(modes)))
        return [Contender(model=model, form=form, compiled=m, swaps=swaps) for m in ("", *modes)]

    def ms(c) -> float:  # every kernel slows the model but b; the default mode is 0.01 ms slower
        return 1.0 + sum({"a": 0.2, "b": -0.3, "c": 0.1}[s.name] for s in c.swaps) + 0.01 * (c.compiled != "")
    monkeypatch.setattr(choose, "contenders_of", contenders_of)
    monkeypatch.setattr(choose, "time_contenders", lambda cs, inputs, **k: [ms(c) for c in cs])
    a, b, c = Named("a"), Named("b"), Named("c")
    build = lambda kept: [(torch.nn.Identity(), "graph", kept)]  # noqa: E731
    both = (COMPILE_DEFAULT, COMPILE_CUDA_GRAPHS)
    got = choose.choose(torch.nn.Identity(), build, one_each(a, c, b), (torch.ones(1),), device="cuda",
                        modes=both)
    assert built[:2] == [(("a", "c", "b"), both), ((), both)]  # every kernel in, the original
    tries = built[2:-1]
    assert tries and all(modes == (COMPILE_CUDA_GRAPHS,) for _, modes in tries)
    assert built[-1] == (("b",), both) and got.kept == (b,)
    assert {name for name, _ in got.timings} >= {"torch.compile(deployed (graph))",
                                                  "torch.compile(deployed (graph), mode='reduce-overhead')"}
    assert modes_to_try((COMPILE_DEFAULT,)) == (COMPILE_DEFAULT,)  # a CPU: the one compiled form


def test_a_runner_up_dropped_on_a_later_pass_is_not_said_to_have_replaced_its_kernel(monkeypatch):
    """A unit's runner-up goes in on the first pass; on the next pass the model is faster
    without it (timings change between passes, as noise makes them do): it is dropped, and
    `replaced` no longer names it."""
    a, a2, b = Named("a"), Named("a2"), Named("b")
    units = [Unit(swaps=(a,), alternatives=((a2,),)), Unit(swaps=(b,))]
    tries = []

    def ms(names: frozenset) -> float:
        second_pass = len(tries) > 3  # every kernel in vs the original, a's try, b's try: then a2's
        table = {frozenset(): 10.0, frozenset("ab"): 5.0, frozenset({"a2", "b"}): 4.0, frozenset("b"): 4.5,
                 frozenset({"a2"}): 6.0}
        if second_pass and names == frozenset("b"):
            return 3.0
        return table[names]

    def clock(cs, inputs, **k):
        tries.append(cs)
        return [ms(frozenset(s.name for s in c.swaps)) for c in cs]

    monkeypatch.setattr(choose, "time_contenders", clock)
    build = lambda kept: [(torch.nn.Identity(), "graph", kept)]  # noqa: E731
    got = choose.choose(torch.nn.Identity(), build, units, (torch.ones(1),), device="cpu", modes=())
    assert got.kept == (b,)
    assert [s.name for s, _ in got.dropped] == ["a2"]
    assert got.replaced == ()


def test_progress_tells_each_try_by_its_label_and_the_final_timing(monkeypatch):
    """With `progress`, choose says what it built, which way the elimination goes, each
    try's outcome (the unit's label, kept or out, with the times) and the final timing;
    without it, it decides the same."""
    def clock(cs, inputs, **k):  # the original slowest; each swap costs 0.1; "weak" costs 0.5 more
        return [2.0 if not c.swaps else 1.0 + 0.1 * len(c.swaps) + 0.5 * any(s.name == "weak" for s in c.swaps)
                for c in cs]

    monkeypatch.setattr(choose, "time_contenders", clock)
    build = lambda kept: [(torch.nn.Identity(), "graph", kept)]  # noqa: E731
    weak, strong = Named("weak"), Named("strong")
    units = [Unit(swaps=(weak,), label="task_w (template:fused)"), Unit(swaps=(strong,), label="task_s (seed)")]
    lines: list = []
    got = choose.choose(torch.nn.Identity(), build, units, (torch.ones(1),), device="cpu", modes=(),
                        progress=lines.append)
    assert [s.name for s in got.kept] == ["strong"]
    assert lines[0].startswith("built the model with every kernel in (2 region occurrence(s) of 2 task(s)), eager")
    assert lines[1].startswith("the model with every kernel in was faster than the original: dropping tasks")
    assert lines[2].startswith("try 1/2 (") and lines[2].endswith(
        "task_w (template:fused): out: 1.1 ms (deployed (graph)) without it, 1.7 ms (deployed (graph)) with it")
    # the one unit left has no try of its own: the final timing holds it beside the original
    assert len(lines) == 5 and lines[3].startswith("final timing: original 2 ms, deployed (graph) 1.1 ms (")
    assert lines[4].startswith("timed again, the two alone: deployed (graph) 1.1 ms, original 2 ms (")
    assert choose.choose(torch.nn.Identity(), build, units, (torch.ones(1),), device="cpu", modes=()).kept == got.kept
