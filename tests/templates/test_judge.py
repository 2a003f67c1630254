"""Template candidates through the real judge (sandboxed worker, every guard)."""

import pytest

from tests.templates.helpers import TASKS

from foundry.tasks import load_task
from foundry.templates.engine import emit
from foundry.types import Candidate

evaluate = pytest.importorskip("foundry.evaluate")


@pytest.fixture(scope="module")
def judge():
    from foundry.evaluate.config import EvalConfig
    cfg = EvalConfig.from_config({"trials": 2, "compile_baseline": False, "timing_min_ms": 20.0,
                                  "warmup_ms": 5.0, "check_variants": False})
    with evaluate.Evaluator(config=cfg) as ev:
        yield ev


@pytest.mark.parametrize("name,backend,variant", [
    ("softmax_rows", "c", "fused"), ("cumsum_reverse", "c", "fused"), ("sum_dim1", "triton", "fused"),
    ("conv_relu_avgpool", "c", "fused"), ("conv_relu_avgpool", "c", "conv"), ("conv_relu_avgpool", "triton", "fused"),
    ("conv_relu_avgpool", "triton", "conv"), ("gemm_gelu_bias", "triton", "matmul"),
    ("gemm_gelu_bias", "triton", "linear"), ("attention", "c", "fused"), ("attention", "triton", "fused"),
    ("causal_scores", "c", "fused"), ("causal_scores", "triton", "fused")])
def test_template_candidate_passes_every_guard(judge, name, backend, variant):
    task = load_task(TASKS / f"{name}.py", profile="small")
    cand = Candidate.make(task_id=task.task_id, source=emit(task, backend=backend, variant=variant),
                          backend=backend, origin="template")
    r = judge.evaluate(task=task, candidate=cand)
    assert r.flags == () and r.correct, r.error
    assert r.runtime_ms and r.runtime_ms > 0


def test_a_lone_linear_is_judged_on_its_own_product(judge, tmp_path):
    """A forward that is one nn.Linear: on Triton only the Linear kernels' candidate (a
    `fused` one would leave the product to the library, which the judge refuses where the
    task is only that product), and it passes every guard; on the c backend likewise the C
    Linear kernel's candidate alone."""
    from tests.templates.helpers import make_task
    from foundry.templates.engine import variants
    task = make_task(tmp_path, "lone_linear", forward="return self.linear0(x)", sig="x",
                     init="self.linear0 = nn.Linear(40, 24)", inputs="[torch.randn(2, 12, 40)]")
    assert variants(task, "triton") == ("linear",)
    assert variants(task, "c") == ("linear",)
    cand = Candidate.make(task_id=task.task_id, source=emit(task, backend="triton", variant="linear"),
                          backend="triton", origin="template")
    r = judge.evaluate(task=task, candidate=cand)
    assert r.flags == () and r.correct, r.error
    cand = Candidate.make(task_id=task.task_id, source=emit(task, backend="c", variant="linear"),
                          backend="c", origin="template")
    r = judge.evaluate(task=task, candidate=cand)
    assert r.flags == () and r.correct, r.error
