"""End to end: a model whose class is named `Model` (as in every KernelBench file) is
extracted by `python -m foundry.extract`, and a template candidate for its tasks is judged
correct by the real judge: the task's docstring names `Model`, which no check may take for
a call."""

import subprocess
import sys
from pathlib import Path

import pytest

from foundry.extract import read_manifest
from foundry.tasks import load_task
from foundry.templates.engine import emit
from foundry.types import Candidate

HERE = Path(__file__).parent


def test_an_extracted_task_of_a_class_named_model_gets_a_correct_template_candidate(tmp_path):
    from foundry.evaluate import Evaluator
    from foundry.evaluate.config import EvalConfig
    run = subprocess.run([sys.executable, "-m", "foundry.extract", f"{HERE / 'kernelbench_style.py'}:build",
                          "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    entry = next(r for r in read_manifest(tmp_path).regions if r.label == "linear_relu")
    task_file = tmp_path / entry.file
    assert "of Model (" in task_file.read_text()  # what the old text check took for a call
    task = load_task(task_file, profile="small")
    source = emit(task, backend="c")
    assert "of Model (" in source
    cfg = EvalConfig.from_config({"trials": 2, "compile_baseline": False, "timing_min_ms": 20.0,
                                  "warmup_ms": 5.0, "check_variants": False})
    with Evaluator(config=cfg) as judge:
        r = judge.evaluate(task=task, candidate=Candidate.make(task_id=task.task_id, source=source,
                                                                backend="c", origin="template"))
    assert r.flags == () and r.correct, r.error
    assert r.runtime_ms and r.runtime_ms > 0
