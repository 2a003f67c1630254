"""The in-process measure checks a candidate with the judge's tolerance, not one of its own."""

import textwrap

import torch

from foundry.evaluate.compare import tolerance
from foundry.tasks import load_task
from foundry.tuning.inprocess import InProcessMeasure
from foundry.types import Candidate

TASK = """
import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return x * 2.0
def get_inputs():
    return [torch.rand(4, 64) + 1.0]
def get_init_inputs():
    return []
"""

# a candidate off from the reference by a relative `scale`; `tail` sets the task's tolerance
CANDIDATE = """
import torch
import torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, x):
        return x * (2.0 * (1.0 + {scale}))
"""


def _task(tmp_path, tail=""):
    p = tmp_path / "t.py"
    p.write_text(textwrap.dedent(TASK) + tail)
    return load_task(p)


def _correct(measure, task, scale):
    cand = Candidate.make(task_id=task.task_id, source=CANDIDATE.format(scale=scale), backend="torch")
    return measure(cand).correct


def test_a_task_without_its_own_tolerance_gets_the_judges_float32_default(tmp_path):
    task = _task(tmp_path)
    measure = InProcessMeasure(task=task, rounds=1)
    assert (measure.atol, measure.rtol) == tolerance(torch.float32, None, None) == (2e-4, 2e-4)
    # 1.5e-4 relative: inside the judge's float32 tolerance (it failed the old 1e-4 default)
    assert _correct(measure, task, 1.5e-4)
    assert not _correct(measure, task, 2e-3)


def test_the_tasks_tolerance_and_an_explicit_one_still_win(tmp_path):
    task = _task(tmp_path, "TOLERANCES = {\"atol\": 1e-6, \"rtol\": 1e-6}\n")
    assert (task.atol, task.rtol) == (1e-6, 1e-6)
    strict = InProcessMeasure(task=task, rounds=1)
    assert (strict.atol, strict.rtol) == (1e-6, 1e-6) and not _correct(strict, task, 1.5e-4)
    loose = InProcessMeasure(task=_task(tmp_path), rounds=1, atol=1e-2, rtol=1e-2)
    assert _correct(loose, _task(tmp_path), 2e-3)
