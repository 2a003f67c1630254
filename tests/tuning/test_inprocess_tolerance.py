"""The in-process measure checks a candidate the way the judge does: its tolerance and its comparison."""

import textwrap

import torch

from foundry.evaluate.compare import compare, tolerance
from foundry.tasks import load_task
from foundry.tuning.inprocess import InProcessMeasure
from foundry.types import Candidate, Stage

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


LARGE_TASK = """
import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return x * 1000.0
def get_inputs():
    return [torch.rand(4, 256)]
def get_init_inputs():
    return []
"""

# off from the reference by an absolute `offset`, also where the reference is near zero
OFFSET = """
import torch
import torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, x):
        return x * 1000.0 + {offset}
"""


def test_its_atol_is_scaled_by_the_references_rms_as_the_judges_is(tmp_path):
    # outputs of RMS ~577: the judge allows 2e-4 x 577 ~ 0.115 of absolute error, which a
    # plain allclose at atol 2e-4 refuses where the reference is near zero
    p = tmp_path / "large.py"
    p.write_text(textwrap.dedent(LARGE_TASK))
    task = load_task(p)
    measure = InProcessMeasure(task=task, rounds=1)
    for offset, judged_ok in ((0.05, True), (0.5, False)):
        cand = Candidate.make(task_id=task.task_id, source=OFFSET.format(offset=offset), backend="torch")
        result = measure(cand)
        got = measure.expected + offset
        assert compare(measure.expected, got).ok is judged_ok
        assert result.correct is judged_ok, result.error
        if not judged_ok:
            assert "atol" in result.error and "scale" in result.error


def test_a_wrong_shape_fails_at_the_shape_stage(tmp_path):
    task = _task(tmp_path)
    cand = Candidate.make(task_id=task.task_id, backend="torch",
                          source=CANDIDATE.format(scale=0.0).replace("x * (", "x[:2] * ("))
    result = InProcessMeasure(task=task, rounds=1)(cand)
    assert not result.correct and result.stage == int(Stage.SHAPE) and "shape" in result.error
