"""A user's model whose class is named `Model` (as in every KernelBench file), end to end on
the CPU: the task file as SPEC, extraction, a template candidate on the `c` backend judged
correct by the judge's own CLI, a run directory holding that verdict, and deploy: the
kernel goes in, the deployed model and torch.compile of it give the original's result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from foundry.deploy import deploy
from foundry.deploy.__main__ import main as deploy_main
from foundry.extract import read_manifest
from foundry.extract.__main__ import main as extract_main
from foundry.extract.spec import load_spec
from foundry.store.best import write_best
from foundry.store.evallog import EvaluationLog
from foundry.store.rundir import RunDir
from foundry.tasks import load_task
from foundry.templates.engine import emit
from foundry.types import Candidate, EvalResult, Stage

ROOT = Path(__file__).resolve().parents[2]

# one pointwise chain of seven torch ops: one pass of a C loop beats seven passes of torch's
TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.scale = nn.Parameter(torch.rand(width) + 0.5)

    def forward(self, x):
        h = x * self.scale
        return torch.tanh(h) * torch.sigmoid(h) + 0.5 * h * h - torch.exp(-h * h)


def get_inputs():
    return [torch.randn(64, 512)]


def get_init_inputs():
    return [512]
'''


def judge(task_file: Path, candidate_file: Path, cache: Path) -> dict:
    p = subprocess.run([sys.executable, "-m", "foundry.evaluate", str(task_file), str(candidate_file), "--json",
                        "--trials", "2", "--no-compile-baseline"], capture_output=True, text=True, timeout=240,
                       cwd=ROOT, env={**os.environ, "FOUNDRY_CACHE_DIR": str(cache)})
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def run_with(root: Path, tasks: Path, task_id: str, source: str, verdict: dict) -> Path:
    """A run directory holding the judge's verdict on one candidate, as the main job writes it."""
    run = RunDir(root)
    OmegaConf.save(OmegaConf.create({"tasks": {"path": str(tasks)}}), run.config)
    cand = Candidate.make(task_id=task_id, source=source, backend="c", params={})
    res = EvalResult(candidate_id=cand.candidate_id, task_id=task_id, stage=int(Stage.CORRECT),
                     correct=verdict["correct"], runtime_ms=verdict["runtime_ms"], eager_ms=verdict["baseline_ms"],
                     speedup_eager=verdict["speedup"], device=verdict["device"], hardware=verdict["hardware"])
    log = EvaluationLog(run.path)
    log.append(cand, res)
    log.close()
    write_best(run, cand, res)
    return run.path


@pytest.mark.slow
def test_a_model_named_model_end_to_end(tmp_path, capsys):
    spec = tmp_path / "chain.py"
    spec.write_text(TASK)
    tasks = tmp_path / "tasks"
    assert extract_main([str(spec), "--out", str(tasks), "--min-share", "0"]) == 0
    manifest = read_manifest(tasks)
    assert manifest.model_class == "Model" and len(manifest.regions) == 1
    entry = manifest.regions[0]
    source = emit(load_task(tasks / entry.file, profile="full"), backend="c")
    assert "class ModelNew" in source
    (tmp_path / "candidate.py").write_text(source)
    verdict = judge(tasks / entry.file, tmp_path / "candidate.py", tmp_path / "cache")
    assert verdict["correct"] is True and verdict["flags"] == [], verdict["error"]
    assert verdict["speedup"] > 1.0, verdict  # the run's own verdict gates deployment: it must say faster
    run = run_with(tmp_path / "run", tasks, entry.task_id, source, verdict)

    model, inputs = load_spec(str(spec))
    deployed = deploy(model, run, example_inputs=inputs, check_speed=False)
    info = deployed.foundry_deploy
    assert [t for t, *_ in info.swapped] == [entry.task_id] and info.returned == "deployed (graph)"
    compiled = torch.compile(deployed, fullgraph=True)
    x = torch.randn(3, 512)  # another batch size: the region's own code, eager and compiled
    with torch.no_grad():
        torch.testing.assert_close(deployed(*inputs), model(*inputs))
        torch.testing.assert_close(compiled(*inputs), model(*inputs))
        torch.testing.assert_close(deployed(x), model(x))
        torch.testing.assert_close(compiled(x), model(x))
    assert info.dispatches[0].kernel_calls >= 2 and info.dispatches[0].fallback_calls >= 2

    assert deploy_main([str(spec), str(run), "--no-compile", "--check"]) == 0  # timed: the fastest comes back
    out = capsys.readouterr().out
    assert "timed here, end to end: original" in out and "returned: " in out and "largest abs error" in out
