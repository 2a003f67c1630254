"""On a GPU: the deployed model under torch.compile with CUDA graphs
(`mode="reduce-overhead"`: the whole forward recorded once for the static shapes and
replayed), its result the original's; and `deploy` weighing the CUDA-graph forms of the
original and of the deployed model beside the others. The region's "kernel" here is the
task's own Model (a correct kernel by construction), so only the compile paths are tested."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn as nn
from omegaconf import OmegaConf

from foundry.deploy import deploy
from foundry.extract import extract
from foundry.store.best import write_best
from foundry.store.evallog import EvaluationLog
from foundry.store.rundir import RunDir
from foundry.types import Candidate, EvalResult, Stage

pytestmark = pytest.mark.gpu
DEVICE = "cuda"


class Chain(nn.Module):
    def __init__(self, width: int = 256):
        super().__init__()
        self.scale = nn.Parameter(torch.rand(width) + 0.5)

    def forward(self, x):
        h = x * self.scale
        return torch.tanh(h) * torch.sigmoid(h) + 0.5 * h * h - torch.exp(-h * h)


def _run(root: Path, tasks: Path, task_id: str, source: str) -> Path:
    run = RunDir(root)
    OmegaConf.save(OmegaConf.create({"tasks": {"path": str(tasks)}}), run.config)
    cand = Candidate.make(task_id=task_id, source=source, backend="cuda", params={})
    res = EvalResult(candidate_id=cand.candidate_id, task_id=task_id, stage=int(Stage.CORRECT), correct=True,
                     runtime_ms=0.01, eager_ms=0.02, speedup_eager=2.0, device="cuda", hardware="gpu:test")
    log = EvaluationLog(run.path)
    log.append(cand, res)
    log.close()
    write_best(run, cand, res)
    return run.path


@pytest.fixture(scope="module")
def chain_run(tmp_path_factory):
    torch.manual_seed(0)
    model = Chain().to(DEVICE).eval()
    inputs = (torch.randn(32, 256, device=DEVICE),)
    tasks = tmp_path_factory.mktemp("tasks")
    entry = extract(model, inputs, tasks).regions[0]
    source = (tasks / entry.file).read_text() + "\n\nclass ModelNew(Model):\n    pass\n"
    return model, inputs, _run(tmp_path_factory.mktemp("run"), tasks, entry.task_id, source)


def test_cuda_graphs_of_the_deployed_model_equal_the_original(chain_run):
    model, inputs, run = chain_run
    deployed = deploy(model, run, example_inputs=inputs, check_speed=False)
    assert len(deployed.foundry_deploy.swapped) == 1
    graphed = torch.compile(deployed, mode="reduce-overhead", fullgraph=True)
    with torch.no_grad():
        want = model(*inputs)
        for _ in range(4):  # warm-up, record, replays
            got = graphed(*inputs).clone()
            torch.testing.assert_close(got, want)
        other = torch.randn(8, 256, device=DEVICE)  # another batch size: the region's own code
        torch.testing.assert_close(graphed(other).clone(), model(other))
    assert deployed.foundry_deploy.dispatches[0].kernel_calls >= 1


def test_deploy_weighs_the_cuda_graph_forms(chain_run):
    model, inputs, run = chain_run
    got = deploy(model, run, example_inputs=inputs)
    info = got.foundry_deploy
    names = [n for n, _ in info.timings]
    assert "torch.compile(original, mode='reduce-overhead')" in names
    assert any(n.startswith("torch.compile(deployed") and "reduce-overhead" in n for n in names), names
    assert info.returned in names and dict(info.timings)[info.returned] == min(ms for _, ms in info.timings)
    with torch.no_grad():
        torch.testing.assert_close(got(*inputs).clone(), model(*inputs))
