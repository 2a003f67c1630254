"""Template candidates through the real judge (sandboxed worker, every guard)."""

import pytest

from tests.templates.helpers import TASKS

from pathlib import Path

from foundry.tasks import load_task
from foundry.templates.engine import emit
from foundry.types import Candidate

evaluate = pytest.importorskip("foundry.evaluate")
EXPLOIT_TASKS = Path(__file__).parents[1] / "exploits" / "tasks"


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
    ("causal_scores", "c", "fused"), ("causal_scores", "triton", "fused"), ("lone_linear", "triton", "linear")])
def test_template_candidate_passes_every_guard(judge, name, backend, variant):
    folder = EXPLOIT_TASKS if name == "attention" else TASKS  # attention: the exploit tests' task too
    task = load_task(folder / f"{name}.py", profile="small")
    cand = Candidate.make(task_id=task.task_id, source=emit(task, backend=backend, variant=variant),
                          backend=backend, origin="template")
    r = judge.evaluate(task=task, candidate=cand)
    assert r.flags == () and r.correct, r.error
    assert r.runtime_ms and r.runtime_ms > 0


def test_a_lone_linear_has_no_c_template_and_only_its_own_product_on_triton():
    """`fused` would leave the product to the library, which the judge refuses where the
    task is only that product; the c templates have no product kernel."""
    from foundry.templates.backend_c import why_not_c
    from foundry.templates.engine import describe_task, variants
    task = load_task(TASKS / "lone_linear.py", profile="small")
    assert variants(task, "triton") == ("linear",)
    assert "no matrix-product kernel" in why_not_c(describe_task(task))
