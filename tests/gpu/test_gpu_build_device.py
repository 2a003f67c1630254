"""Tasks with parameters are built on the GPU (foundry.tasks.inputs.build_device): the
judge's reference and a worker's candidate draw the same weights there."""

from __future__ import annotations

import textwrap

import pytest

from support.gpu_judge import gpu_eval_config

pytestmark = pytest.mark.gpu

GEMM_RELU = textwrap.dedent("""
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def __init__(self, n_in, n_out):
            super().__init__()
            self.fc = nn.Linear(n_in, n_out)

        def forward(self, x):
            return torch.relu(self.fc(x)) * 0.5

    def get_inputs():
        return [torch.randn(256, 512)]

    def get_init_inputs():
        return [512, 384]
""")


def test_the_reference_is_built_on_the_gpu_with_the_same_weights_each_time(tmp_path):
    import torch

    from foundry.evaluate.cuda_device import CudaDevice
    from foundry.evaluate.reference import ReferenceRunner
    from foundry.tasks.loader import load_task

    path = tmp_path / "gemm_relu.py"
    path.write_text(GEMM_RELU)
    task = load_task(path)
    runner = ReferenceRunner(CudaDevice())
    a, b, c = (runner.model(task, {}, seed) for seed in (11, 11, 12))
    assert a.fc.weight.is_cuda
    assert torch.equal(a.fc.weight, b.fc.weight) and torch.equal(a.fc.bias, b.fc.bias)
    assert not torch.equal(a.fc.weight, c.fc.weight)


def test_a_template_over_a_linear_layer_is_judged_correct(tmp_path):
    from foundry.evaluate.evaluator import Evaluator
    from foundry.tasks.loader import load_task
    from foundry.templates.engine import emit
    from foundry.types import Candidate

    path = tmp_path / "gemm_relu.py"
    path.write_text(GEMM_RELU)
    task = load_task(path)
    cand = Candidate.make(task_id=task.task_id, source=emit(task, backend="triton"), backend="triton")
    with Evaluator(config=gpu_eval_config()) as judge:
        result = judge.evaluate(task=task, candidate=cand)
    assert result.correct, result.error
