"""Attention's pieces through the templates, on the `c` backend and Triton's interpreter:
scaled-dot-product attention read as two products around a scaled softmax, and a causal
mask read from a float buffer (`x.masked_fill(m == c, v)`) as one pointwise op, broadcast
over batch and heads."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from tests.templates.helpers import assert_close, make_task, run_candidate  # noqa: E402

from foundry.templates.engine import coverage, describe_task  # noqa: E402

BACKENDS = ["c", pytest.param("triton", marks=pytest.mark.skipif(
    not __import__("importlib").util.find_spec("triton"), reason="triton is not installed"))]
QK = "[torch.randn(2, 3, 9, 8), torch.randn(2, 3, 9, 8)"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("call", ["F.scaled_dot_product_attention(q, k, v)",
                                  "F.scaled_dot_product_attention(q, k, v, scale=0.7)"])
def test_attention_matches_torch(tmp_path, backend, call):
    task = make_task(tmp_path, "sdpa", forward=f"return {call}", sig="q, k, v",
                     inputs="[torch.randn(2, 3, 9, 8), torch.randn(2, 3, 11, 8), torch.randn(2, 3, 11, 5)]")
    assert coverage(task) is None
    ref, got = run_candidate(task, backend=backend)
    assert_close(ref, got, atol=1e-5, rtol=1e-5)


MASKED = [
    ("method_float_mask", "s = s.masked_fill(m == 0, float('-inf'))", "torch.tril(torch.ones(9, 9)).view(1, 1, 9, 9)"),
    ("function", "s = torch.masked_fill(s, torch.eq(m, 0), -1e4)", "(torch.rand(9, 9) < 0.7).float()"),
    ("method_eq_one", "s = s.masked_fill(m.eq(1), 0.5)", "torch.tril(torch.ones(9, 9))"),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name,fill,mask", MASKED, ids=[m[0] for m in MASKED])
def test_masked_scores_match_torch(tmp_path, backend, name, fill, mask):
    forward = f"s = torch.matmul(q, k.transpose(-2, -1)) * 0.3\n{fill}\nreturn torch.softmax(s, dim=-1)"
    task = make_task(tmp_path, name, forward=forward, sig="q, k, m", inputs=f"{QK}, {mask}]")
    (region,) = describe_task(task).regions
    assert "masked_fill_eq" in [i.op for i in region.pre.body]
    ref, got = run_candidate(task, backend=backend)
    assert_close(ref, got, atol=1e-6, rtol=1e-5)


def test_a_boolean_mask_stays_a_torch_op(tmp_path):
    forward = "s = torch.matmul(q, k.transpose(-2, -1)).masked_fill(m == 0, 0.0)\nreturn torch.softmax(s, dim=-1)"
    task = make_task(tmp_path, "boolean", forward=forward, sig="q, k, m", inputs=f"{QK}, torch.rand(9, 9) < 0.5]")
    assert "eq would stay a torch op" in coverage(task)


def test_a_mask_read_twice_stays_a_torch_op(tmp_path):
    """The comparison is folded into the fill only where nothing else reads it."""
    forward = ("mask = m == 0\ns = torch.matmul(q, k.transpose(-2, -1)).masked_fill(mask, 0.0)\n"
               "return torch.softmax(s, dim=-1), mask")
    task = make_task(tmp_path, "twice", forward=forward, sig="q, k, m",
                     inputs=f"{QK}, torch.tril(torch.ones(9, 9))]")
    assert "eq would stay a torch op" in coverage(task)
