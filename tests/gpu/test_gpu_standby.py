"""Children forked ahead of their job on the GPU (`evaluator.standby=true`): a job runs in
the child whose CUDA context was made before the job came, and is judged as in a plain fork."""

from __future__ import annotations

import os
import textwrap

import pytest

from support.gpu_judge import RELU_TASK, gpu_eval_config
from support.processes import is_alive

pytestmark = pytest.mark.gpu

WRONG_RELU = textwrap.dedent('''
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def _copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)

    class ModelNew(torch.nn.Module):
        def forward(self, x):
            y = torch.empty_like(x)
            n = x.numel()
            _copy[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
            return y
''')


def test_jobs_run_in_children_forked_ahead_with_their_cuda_context_ready():
    from foundry.evaluate.evaluator import Evaluator
    from foundry.tasks.loader import load_task
    from foundry.templates.engine import emit
    from foundry.types import Candidate

    task = load_task(RELU_TASK)
    honest = Candidate.make(task_id=task.task_id, source=emit(task, backend="triton"), backend="triton")
    wrong = Candidate.make(task_id=task.task_id, source=WRONG_RELU, backend="triton")
    with Evaluator(config=gpu_eval_config(standby=True)) as judge:
        first = judge.evaluate(task=task, candidate=honest)
        assert first.correct, first.error
        waiting = judge._worker.standby
        assert waiting is not None and is_alive(waiting.pid)
        second = judge.evaluate(task=task, candidate=honest)
        assert second.correct, second.error
        assert not is_alive(waiting.pid)  # the second job ran in it, and it ended with the job
        assert second.metrics.get("forked_ahead") and not first.metrics.get("forked_ahead")
        bad = judge.evaluate(task=task, candidate=wrong)
        assert not bad.correct
        last = judge._worker.standby
    assert last is not None and not is_alive(last.pid)
    assert not os.path.exists(last.setup["tmpdir"])
