"""The Triton matrix-product template through Triton's interpreter on the CPU, at small
sizes: square, sizes that are no multiple of the blocks, transposed operands, batched
and broadcast batches, with SPLIT_K 1 and > 1, operands read in place or copied
K-contiguous, against torch in float32; a matrix-vector product by the tiled kernel and by
the matrix-vector kernel; the split-K sum is deterministic; KernelBench's
level-1 matmul problems at small sizes with the default parameters the template picks
for them."""

import os

os.environ["TRITON_INTERPRET"] = "1"

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

pytest.importorskip("triton")

from tests.templates.product_cases import GEMM_BLOCKS as BLOCKS  # noqa: E402
from tests.templates.product_cases import GEMM_CASES as CASES  # noqa: E402
from tests.templates.helpers import assert_close, make_task, run_candidate, small_problem  # noqa: E402

from foundry.templates.engine import coverage, emit, reference_and_inputs  # noqa: E402
from foundry.tuning.inprocess import load_candidate  # noqa: E402

KERNELBENCH = Path(__file__).resolve().parents[2].parent / "shared" / "kernelbench"
TOL = {"atol": 1e-5, "rtol": 1e-5}


@pytest.mark.parametrize("k_contiguous", [1, 0])
@pytest.mark.parametrize("split_k", [1, 3])
@pytest.mark.parametrize("name,forward,inputs", CASES, ids=[c[0] for c in CASES])
def test_gemm_matches_torch(tmp_path, name, forward, inputs, split_k, k_contiguous):
    task = make_task(tmp_path, name, forward=forward, inputs=inputs, sig="A, B")
    assert coverage(task) is None
    params = {**BLOCKS, "SPLIT_K": split_k, "K_CONTIGUOUS": k_contiguous}
    ref, got = run_candidate(task, backend="triton", params=params)
    assert_close(ref, got, **TOL)


COLUMN_CASES = [c for c in CASES if "column" in c[0]]


@pytest.mark.parametrize("gemv", [1, 0])
@pytest.mark.parametrize("k_contiguous", [1, 0])
@pytest.mark.parametrize("split_k", [1, 3])
@pytest.mark.parametrize("name,forward,inputs", COLUMN_CASES, ids=[c[0] for c in COLUMN_CASES])
def test_matrix_vector_product_by_either_kernel(tmp_path, name, forward, inputs, split_k, k_contiguous, gemv):
    # 16 rows a program leave the last program's rows partly past M (21, 37 and 40 rows);
    # 128-wide K steps leave the last step partly past K (300)
    task = make_task(tmp_path, name, forward=forward, inputs=inputs, sig="A, B")
    params = {**BLOCKS, "SPLIT_K": split_k, "K_CONTIGUOUS": k_contiguous, "GEMV": gemv, "GEMV_ROWS": 16,
              "GEMV_BLOCK_K": 128}
    assert_close(*_run_without(task, params, "_gemm" if gemv else "_gemv"), **TOL)


def _run_without(task, params: dict, kernel: str):
    """(reference output, candidate output) with the candidate's `kernel` unlaunchable."""
    model, init, inputs = reference_and_inputs(task, seed=7)
    mod = load_candidate(emit(task, backend="triton"), params)
    setattr(mod, kernel, None)  # launching it would raise
    torch.manual_seed(7)
    with torch.no_grad():
        return model(*inputs), mod.ModelNew(*init)(*inputs)


def test_matrix_vector_kernel_offered_only_for_one_column(tmp_path):
    column = make_task(tmp_path, "col", forward="return A @ B", inputs="[torch.randn(40, 300), torch.randn(300, 1)]",
                       sig="A, B")
    square = make_task(tmp_path, "sq", forward="return A @ B", inputs="[torch.randn(40, 300), torch.randn(300, 2)]",
                       sig="A, B")
    assert "'GEMV': [1, 0]" in emit(column, backend="triton")
    assert "'GEMV'" not in emit(square, backend="triton")
    # a stale GEMV setting on a product of two columns runs the tiled kernel
    stale = {**BLOCKS, "SPLIT_K": 2, "GEMV": 1, "GEMV_ROWS": 4, "GEMV_BLOCK_K": 256}
    assert_close(*_run_without(square, stale, "_gemv"), **TOL)


def test_split_k_takes_the_tunable_space_passed_in(tmp_path):
    task = make_task(tmp_path, "tun", forward="return A @ B", inputs="[torch.randn(16, 200), torch.randn(200, 16)]",
                     sig="A, B")
    tunable = {"BLOCK_M": [16], "BLOCK_N": [16], "BLOCK_K": [16], "SPLIT_K": [4], "GROUP_M": [1],
               "num_warps": [4], "num_stages": [2]}
    src = emit(task, backend="triton", tunable=tunable)
    assert "TUNABLE = " + repr(tunable) in src and "'SPLIT_K': 4" in src
    ref, got = run_candidate(task, backend="triton", tunable=tunable)
    assert_close(ref, got, **TOL)


def test_split_k_sum_is_deterministic(tmp_path):
    task = make_task(tmp_path, "det", forward="return A @ B", inputs="[torch.randn(20, 500), torch.randn(500, 18)]",
                     sig="A, B")
    model, init, inputs = reference_and_inputs(task, seed=7)
    mod = load_candidate(emit(task, backend="triton"), {**BLOCKS, "SPLIT_K": 8})
    new = mod.ModelNew(*init)
    with torch.no_grad():
        first, second = new(*inputs), new(*inputs)
    assert torch.equal(first, second)
    assert_close(model(*inputs), first, **TOL)


def test_half_operands_accumulate_in_float32(tmp_path):
    # float16 only: the interpreter's tl.dot multiplies bfloat16 tiles as raw bits (a
    # bfloat16 product is only checked on a GPU)
    task = make_task(tmp_path, "fp16", forward="return A @ B", sig="A, B",
                     inputs="[torch.randn(24, 70).half(), torch.randn(70, 20).half()]")
    model, init, inputs = reference_and_inputs(task, seed=7)
    mod = load_candidate(emit(task, backend="triton"), {**BLOCKS, "SPLIT_K": 2})
    with torch.no_grad():
        got = mod.ModelNew(*init)(*inputs)
    want = (inputs[0].float() @ inputs[1].float()).half()  # one rounding of the fp32 product
    assert got.dtype == torch.float16
    torch.testing.assert_close(got.float(), want.float(), atol=1e-2, rtol=1e-3)


# (problem file, size constants small enough for the interpreter); the template's own
# default parameters (split-K where K is long next to M * N)
PROBLEMS = [
    ("level1/1_Square_matrix_multiplication_.py", {"N": 40}),
    ("level1/4_Matrix_vector_multiplication_.py", {"M": 24, "K": 3000}),
    ("level1/6_Matmul_with_large_K_dimension_.py", {"M": 20, "N": 18, "K": 3000}),
    ("level1/9_Tall_skinny_matrix_multiplication_.py", {"M": 70, "N": 12}),
    ("level1/10_3D_tensor_matrix_multiplication.py", {"N": 2, "M": 20, "K": 40, "L": 18}),
    ("level1/16_Matmul_with_transposed_A.py", {"M": 20, "K": 50, "N": 30}),
    ("level1/17_Matmul_with_transposed_B.py", {"M": 20, "K": 50, "N": 30}),
]


@pytest.mark.parametrize("problem,sizes", PROBLEMS, ids=[p.split("/")[-1][:-3] for p, _ in PROBLEMS])
def test_kernelbench_matmul_problem_matches_with_default_params(tmp_path, problem, sizes):
    task = small_problem(tmp_path, KERNELBENCH / problem, sizes)
    assert coverage(task) is None
    ref, got = run_candidate(task, backend="triton")
    assert_close(ref, got, atol=1e-4, rtol=1e-5)
