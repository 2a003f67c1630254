"""Tasks that compute in bfloat16 or float16: the Triton templates read and write the
task's dtype and compute in float32 (one rounding, at the store), checked under Triton's
interpreter against eager at the 16-bit tolerance the judge uses; the `c` templates say
they do not take such a task."""

import os

os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402

pytest.importorskip("triton")

import torch  # noqa: E402

from foundry.evaluate.compare import DEFAULT_TOLERANCES  # noqa: E402
from foundry.templates.engine import describe_task, emit, variants  # noqa: E402
from foundry.templates.proposer import TemplateProposer  # noqa: E402
from foundry.types import ProposalRequest  # noqa: E402
from tests.templates.cases import HALF_CASES  # noqa: E402
from tests.templates.helpers import make_task, run_candidate  # noqa: E402


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("name,forward,init", HALF_CASES, ids=[c[0] for c in HALF_CASES])
def test_half_precision_task_matches_eager_in_triton(tmp_path, name, forward, init, dtype):
    task = make_task(tmp_path, f"{name}_{dtype}", forward=forward, init=f"{init}\nself.to(torch.{dtype})",
                     inputs=f"[torch.randn(4, 33).to(torch.{dtype})]")
    assert describe_task(task).half_dtypes == (dtype,)
    src = emit(task, backend="triton")
    assert f"torch.{dtype}" in src  # the output is allocated in the task's dtype
    ref, got = run_candidate(task, backend="triton", params={"BLOCK": 16, "SPLIT": 2})
    assert got.dtype == ref.dtype == getattr(torch, dtype) and got.shape == ref.shape
    atol, rtol = DEFAULT_TOLERANCES[getattr(torch, dtype)]
    torch.testing.assert_close(got, ref, atol=atol, rtol=rtol)
    # computed in float32 and rounded once: at least as close to the float32 answer as eager
    exact = run_candidate(make_task(tmp_path, f"{name}_f32", forward=forward, init=init,
                                    inputs=f"[torch.randn(4, 33).to(torch.{dtype}).float()]"),
                          backend="triton", params={"BLOCK": 16, "SPLIT": 2})[0]
    assert (got.float() - exact).abs().max() <= (ref.float() - exact).abs().max() + 2 * atol


def test_the_c_templates_decline_a_bfloat16_task_and_say_why(tmp_path):
    task = make_task(tmp_path, "relu_bf16", forward="return torch.relu(xs[0]) * 2.0",
                     inputs="[torch.randn(4, 33).to(torch.bfloat16)]")
    with pytest.raises(ValueError, match="c templates compute float32 tasks only.*bfloat16"):
        emit(task, backend="c")
    request = ProposalRequest(task=task, backend="c", mode="translate")
    cand = TemplateProposer().propose_sync(request)
    assert not cand.source and "bfloat16" in cand.note and "triton templates take it" in cand.note
    assert TemplateProposer().propose_sync(ProposalRequest(task=task, backend="triton", mode="translate")).source


def test_a_float64_forward_is_still_not_covered(tmp_path):
    task = make_task(tmp_path, "relu_f64", forward="return torch.relu(xs[0]) * 2.0",
                     inputs="[torch.randn(4, 33).double()]")
    with pytest.raises(ValueError, match="float64"):
        describe_task(task)


def test_a_half_precision_linear_gets_the_fused_template_only(tmp_path):
    """The matmul-with-epilogue template reads and writes float32: not offered in bf16."""
    task = make_task(tmp_path, "mm_bf16", forward="return F.gelu(self.l(x)) * 0.5", sig="x",
                     init="self.l = nn.Linear(33, 20)\nself.to(torch.bfloat16)",
                     inputs="[torch.randn(5, 33).to(torch.bfloat16)]")
    assert variants(task, "triton") == ("fused",)
    ref, got = run_candidate(task, backend="triton", params={"BLOCK": 16})
    atol, rtol = DEFAULT_TOLERANCES[torch.bfloat16]
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got, ref, atol=atol, rtol=rtol)
