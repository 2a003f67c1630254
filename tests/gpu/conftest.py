"""GPU tests: one evaluator (one warm worker) per module, on the ReLU task at small size."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from support.gpu_judge import RELU_TASK, gpu_eval_config

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "benchmarks"))


@pytest.fixture(scope="module")
def judge():
    """judge(source, backend, task_path=RELU_TASK, profile="small") -> EvalResult"""
    from foundry.evaluate.evaluator import Evaluator
    from foundry.tasks.loader import load_task
    from foundry.types import Candidate

    ev = Evaluator(config=gpu_eval_config())
    tasks = {}

    def run(source: str, backend: str = "cuda", *, task_path=RELU_TASK, profile="small"):
        key = (str(task_path), profile)
        if key not in tasks:
            tasks[key] = load_task(task_path, profile=profile)
        task = tasks[key]
        cand = Candidate.make(task_id=task.task_id, source=source, backend=backend)
        return ev.evaluate(task=task, candidate=cand)

    yield run
    ev.close()


@pytest.fixture(scope="module")
def honest_result(judge):
    import exploits
    return judge(exploits.HONEST, "cuda")
