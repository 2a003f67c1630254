"""Runners-up: deploy tries the best kernel of each other strategy of a task in the model
too, and the one that makes the model fastest goes in (foundry.deploy.runinfo, choose)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from foundry.deploy import deploy
from foundry.deploy.runinfo import RUNNERS_UP, read_run
from foundry.extract import extract
from foundry.store.best import write_best
from foundry.store.evallog import EvaluationLog
from foundry.store.rundir import RunDir
from foundry.types import Candidate, EvalResult, Stage

from tests.deploy.test_deploy import GELU_KERNEL, _models, scripted_clock


def judged_run(root: Path, tasks: Path, task_id: str, kernels: list[tuple[str, str, float, bool]]) -> Path:
    """A run directory holding, for `task_id`, one evaluation per (strategy, source,
    speedup over eager, correct) in `kernels`, and best/<task>.py for the fastest correct."""
    run = RunDir(root)
    OmegaConf.save(OmegaConf.create({"tasks": {"path": str(tasks)}}), run.config)
    log = EvaluationLog(run.path)
    best = None
    for strategy, source, speedup, ok in kernels:
        cand = Candidate.make(task_id=task_id, source=source, backend="c", params={"UNROLL": 1},
                              strategy_id=strategy, origin="template")
        res = EvalResult(candidate_id=cand.candidate_id, task_id=task_id,
                         stage=int(Stage.CORRECT if ok else Stage.VALUE), correct=ok, runtime_ms=0.01,
                         eager_ms=0.01 * speedup, speedup_eager=speedup, compile_ms=0.01,
                         speedup_compile=speedup, device="cpu", hardware="cpu:test")
        log.append(cand, res)
        if ok and (best is None or speedup > best[2]):
            best = (cand, res, speedup)
    log.close()
    write_best(run, best[0], best[1])
    return run.path


def gelu_kernel(label: str) -> str:
    """GELU_KERNEL with a comment naming `label`: the same function, another candidate."""
    return f"# {label}\n" + GELU_KERNEL


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    model, inputs = _models().build_mlp()
    tasks = tmp_path_factory.mktemp("tasks")
    manifest = extract(model, inputs, tasks)
    task_id = next(r.task_id for r in manifest.regions if r.label == "linear_gelu")
    return model, inputs, tasks, task_id


def test_the_runners_up_are_the_best_deployable_kernel_of_each_other_strategy(mlp, tmp_path):
    model, _, tasks, task_id = mlp
    run = judged_run(tmp_path, tasks, task_id, [
        ("template:a", gelu_kernel("a1"), 3.0, True),
        ("template:a", gelu_kernel("a2"), 2.5, True),  # the best's own strategy: not a runner-up
        ("template:b", gelu_kernel("b1"), 1.2, True),
        ("template:b", gelu_kernel("b2"), 1.6, True),  # b's fastest
        ("template:c", gelu_kernel("c1"), 1.4, True),
        ("template:d", gelu_kernel("d1"), 1.3, True),  # past RUNNERS_UP
        ("template:e", gelu_kernel("e1"), 0.9, True),  # slower than eager and torch.compile
        ("template:f", gelu_kernel("f1"), 5.0, False),  # wrong
    ])
    kernels = read_run(run, model)
    (best, others), = kernels.by_task()
    assert best.strategy == "template:a" and best.speedup_eager == 3.0 and best.path.endswith(".py")
    assert best.source == Path(best.path).read_text()
    assert RUNNERS_UP == 2
    assert [(k.strategy, k.speedup_eager) for k in others] == [("template:b", 1.6), ("template:c", 1.4)]
    assert others[0].source.startswith("# b2\n") and "PARAMS = {'UNROLL': 1}" in others[0].source
    assert not Path(others[0].path).exists() and others[0].candidate_id in others[0].path


def _strategies(contender) -> tuple:
    return tuple(sorted(s.record[3] for s in contender.swaps))


@pytest.mark.parametrize("fast", ["template:slow", "template:fast", "none"])
def test_the_kernel_that_makes_the_model_fastest_goes_in(mlp, tmp_path, monkeypatch, fast):
    """The run's best kernel (3x alone) and a runner-up (1.5x alone) for the region both
    blocks of the MLP hold; the scripted clock makes the model fastest with `fast`'s kernel
    in both blocks ("none": with no kernel in)."""
    model, inputs, tasks, task_id = mlp
    run = judged_run(tmp_path, tasks, task_id, [("template:slow", gelu_kernel("slow"), 3.0, True),
                                               ("template:fast", gelu_kernel("fast"), 1.5, True)])

    def ms_of(contender) -> float:
        if not contender.form:
            return 2.0 if fast != "none" else 1.0
        return 2.0 - sum(0.3 if s == fast else 0.1 for s in _strategies(contender))

    scripted_clock(monkeypatch, ms_of)
    got = deploy(model, run, example_inputs=inputs, with_compile=False)
    info = got.foundry_deploy
    if fast == "none":
        assert info.returned == "original" and not info.swapped
        del model.foundry_deploy
        return
    assert info.returned == "deployed (graph)"
    assert [s for *_, s in info.swapped] == [fast, fast]
    if fast == "template:fast":
        assert [(t, best, instead) for t, _, best, instead, _ in info.replaced] == \
            [(task_id, "template:slow", "template:fast")] * 2
        assert all("with the other kernel instead was faster" in why for *_, why in info.replaced)
    else:
        assert info.replaced == ()
    with torch.no_grad():
        torch.testing.assert_close(got(*inputs), model(*inputs))
    assert [d.kernel_calls for d in info.dispatches] == [1, 1]


def test_a_runner_up_goes_in_where_the_best_kernel_fails_its_check_in_the_model(mlp, tmp_path):
    """The best kernel is wrong on the values the region sees in the model (it passed the
    judge, say, on other shapes' values); the runner-up is right: it goes in alone."""
    model, inputs, tasks, task_id = mlp
    wrong = GELU_KERNEL.replace("0.5f * x[i]", "0.6f * x[i]")
    run = judged_run(tmp_path, tasks, task_id, [("template:wrong", wrong, 3.0, True),
                                               ("template:right", gelu_kernel("right"), 1.5, True)])
    got = deploy(model, run, example_inputs=inputs, check_speed=False)
    info = got.foundry_deploy
    assert [s for *_, s in info.swapped] == ["template:right", "template:right"]
    assert [t for t, why in info.passed_over if "differs from the region's" in why] == [task_id, task_id]
    with torch.no_grad():
        torch.testing.assert_close(got(*inputs), model(*inputs))
