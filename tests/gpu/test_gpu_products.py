"""The matrix-product and convolution templates as real Triton kernels on the GPU: the
cases the CPU tests run under Triton's interpreter (tests/templates/product_cases.py),
compiled and launched for real with each float32 product (dot_precision.F32_DOT) and,
for the convolutions, each order of a strided transposed one's phases (ALL_PHASES) and
the taps-outermost kernel on channels-last copies or not (CHANNELS_LAST), a
split-K product over a long K with the parameters the template picks, and bfloat16
operands (the interpreter's bf16 dot cannot check them)."""

from __future__ import annotations

import pytest

from foundry.templates.dot_precision import F32_DOT
from tests.templates.helpers import assert_close, make_task, run_candidate
from tests.templates.product_cases import CONV_BLOCKS, CONV_CASES, GEMM_BLOCKS, GEMM_CASES, TAPS_CASES

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("k_contiguous", [1, 0])
@pytest.mark.parametrize("f32_dot", F32_DOT)
@pytest.mark.parametrize("split_k", [1, 3])
@pytest.mark.parametrize("name,forward,inputs", GEMM_CASES, ids=[c[0] for c in GEMM_CASES])
def test_gemm_case_on_the_gpu(tmp_path, name, forward, inputs, split_k, f32_dot, k_contiguous):
    task = make_task(tmp_path, name, forward=forward, inputs=inputs, sig="A, B")
    params = {**GEMM_BLOCKS, "SPLIT_K": split_k, "F32_DOT": f32_dot, "K_CONTIGUOUS": k_contiguous}
    ref, got = run_candidate(task, backend="triton", params=params, device="cuda")
    assert got.is_cuda
    assert_close(ref.cpu(), got.cpu(), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("outer", [1, 0])  # a few input channels per group: outer products, or the GEMM
@pytest.mark.parametrize("all_phases", [1, 0])
@pytest.mark.parametrize("f32_dot", F32_DOT)
@pytest.mark.parametrize("name,module,x", CONV_CASES, ids=[c[0] for c in CONV_CASES])
def test_conv_case_on_the_gpu(tmp_path, name, module, x, f32_dot, all_phases, outer):
    task = make_task(tmp_path, name, forward="return self.conv(x)", init=f"self.conv = {module}",
                     inputs=f"[{x}]", sig="x")
    params = {**CONV_BLOCKS, "F32_DOT": f32_dot, "ALL_PHASES": all_phases, "OUTER": outer}
    ref, got = run_candidate(task, backend="triton", params=params, device="cuda")
    assert got.is_cuda
    assert_close(ref.cpu(), got.cpu(), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("channels_last", [1, 0])  # the taps kernel on channels-last copies, or as given
@pytest.mark.parametrize("f32_dot", F32_DOT)
@pytest.mark.parametrize("name,module,x", TAPS_CASES, ids=[c[0] for c in TAPS_CASES])
def test_taps_case_on_the_gpu(tmp_path, name, module, x, f32_dot, channels_last):
    task = make_task(tmp_path, name, forward="return self.conv(x)", init=f"self.conv = {module}",
                     inputs=f"[{x}]", sig="x")
    params = {**CONV_BLOCKS, "F32_DOT": f32_dot, "TAPS": 1, "CHANNELS_LAST": channels_last}
    ref, got = run_candidate(task, backend="triton", params=params, device="cuda")
    assert got.is_cuda
    assert_close(ref.cpu(), got.cpu(), atol=1e-4, rtol=1e-4)


def test_a_long_k_product_splits_k_by_default_and_matches(tmp_path):
    from foundry.templates.engine import describe_task
    from foundry.templates.gemm_triton import gemm_tunable
    task = make_task(tmp_path, "long_k", forward="return torch.matmul(A, B)",
                     inputs="[torch.rand(64, 131072), torch.rand(131072, 64)]", sig="A, B")
    assert gemm_tunable(describe_task(task).gemm)["SPLIT_K"][0] > 1
    ref, got = run_candidate(task, backend="triton", device="cuda")
    assert_close(ref.cpu(), got.cpu(), atol=1e-3, rtol=1e-4)


@pytest.mark.parametrize("name,forward,inputs", [
    ("bf16_product", "return torch.matmul(A, B.T)",
     "[torch.randn(70, 300).to(torch.bfloat16), torch.randn(50, 300).to(torch.bfloat16)]"),
    ("bf16_conv", "return self.conv(x)", "[torch.randn(2, 4, 12, 10).to(torch.bfloat16)]"),
])
def test_bfloat16_templates_match_eager_by_the_judges_rule(tmp_path, name, forward, inputs):
    from foundry.evaluate.compare import compare
    init = "self.conv = nn.Conv2d(4, 6, 3, padding=1).to(torch.bfloat16)" if "conv" in name else "pass"
    task = make_task(tmp_path, name, forward=forward, init=init, inputs=inputs,
                     sig="x" if "conv" in name else "A, B")
    ref, got = run_candidate(task, backend="triton", device="cuda")
    assert got.dtype == ref.dtype
    verdict = compare(ref, got)
    assert verdict.ok, verdict.message
