"""Recognition of a forward that is one matrix product of two inputs (the Triton
matrix-product template): which forms are read into a Gemm, which stay not covered and
why, and which of the KernelBench level-1 matmul problems it covers at their published
sizes (read on the meta device, as the engine does: nothing is allocated)."""

from pathlib import Path

import pytest
import torch
import torch.nn as nn

from tests.templates.helpers import published_problem
from foundry.templates.backend_c import why_not_c
from foundry.templates.engine import coverage, describe_task, variants
from foundry.templates.gemm_triton import TARGET_PROGRAMS, TUNABLE_GEMM, gemm_tunable
from foundry.templates.ir import Gemm
from foundry.templates.recognize import NotCovered, describe

KERNELBENCH = Path(__file__).resolve().parents[2].parent / "shared" / "kernelbench"


class _Fn(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, A, B):
        return self.fn(A, B)


def _gemm(fn, *shapes, dtype=torch.float32):
    return describe(_Fn(fn), [torch.randn(*s, dtype=dtype) for s in shapes]).gemm


@pytest.mark.parametrize("fn,shapes,trans", [
    (lambda A, B: torch.matmul(A, B), [(5, 7), (7, 3)], (False, False)),
    (lambda A, B: A @ B, [(5, 7), (7, 3)], (False, False)),
    (lambda A, B: torch.mm(A.T, B), [(7, 5), (7, 3)], (True, False)),
    (lambda A, B: A.matmul(B.t()), [(5, 7), (3, 7)], (False, True)),
    (lambda A, B: torch.matmul(A.transpose(0, 1), B.transpose(-1, -2)), [(7, 5), (3, 7)], (True, True)),
    (lambda A, B: torch.bmm(A, B), [(2, 5, 7), (2, 7, 3)], (False, False)),
    (lambda A, B: torch.bmm(A.transpose(1, 2), B.mT), [(2, 7, 5), (2, 3, 7)], (True, True)),
    (lambda A, B: torch.matmul(A.permute(0, 2, 1), B), [(2, 7, 5), (2, 7, 3)], (True, False)),
    (lambda A, B: torch.matmul(A, B), [(2, 5, 7), (7, 3)], (False, False)),  # B shared by the batch
    (lambda A, B: torch.matmul(A, B), [(2, 5, 7), (1, 7, 3)], (False, False)),  # a batch of one, too
])
def test_a_lone_matrix_product_of_inputs_is_a_gemm(fn, shapes, trans):
    g = _gemm(fn, *shapes)
    assert (g.a, g.b, g.trans_a, g.trans_b) == ("A", "B", *trans)
    assert (g.batch, g.m, g.n, g.k) == (shapes[0][0] if len(shapes[0]) == 3 else 1, 5, 3, 7)
    d = describe(_Fn(fn), [torch.randn(*s) for s in shapes])
    assert d.regions == () and d.families == ("matmul",) and "self._gemm(A, B)" in d.forward_src


def test_half_operands_are_a_gemm_of_their_dtype():
    g = _gemm(lambda A, B: A @ B, (5, 7), (7, 3), dtype=torch.bfloat16)
    assert g.dtype == "bfloat16"


@pytest.mark.parametrize("fn,shapes,why", [
    (lambda A, B: A @ B, [(5, 7), (7,)], "matrix-vector"),
    (lambda A, B: A @ B, [(2, 2, 5, 7), (2, 7, 3)], "2-D and 3-D"),
    (lambda A, B: A @ B, [(2, 2, 5, 7), (1, 2, 7, 3)], "the same leading dims"),  # a broadcast batch dim
    (lambda A, B: torch.einsum("bij,bjk->bik", A, B), [(2, 5, 7), (2, 7, 3)], "not a tensor times a matrix"),
    (lambda A, B: torch.einsum("bijl,kl->bijk", A, B), [(2, 4, 5, 7), (3, 7)], "not a tensor times a matrix"),
    (lambda A, B: torch.einsum("...l,lk->...k", A, B), [(2, 4, 5, 7), (7, 3)], "not a tensor times a matrix"),
    (lambda A, B: A.transpose(0, 1) @ B, [(5, 2, 7), (2, 7, 3)], "permuted other than"),
])
def test_unsupported_lone_products_say_why(fn, shapes, why):
    with pytest.raises(NotCovered, match=why):
        _gemm(fn, *shapes)


@pytest.mark.parametrize("fn", [lambda A, B: A @ B, lambda A, B: torch.einsum("bijl,lk->bijk", A, B)])
def test_a_tensor_times_a_matrix_is_one_product_over_its_leading_dims(fn):
    d = describe(_Fn(fn), [torch.randn(2, 4, 5, 7), torch.randn(7, 3)])
    assert (d.gemm.m, d.gemm.n, d.gemm.k, d.gemm.batch) == (40, 3, 7, 1)
    assert "self._gemm(A.reshape(-1, A.shape[-1]), B).view(*A.shape[:-1], -1)" in d.forward_src


def test_operands_with_the_same_leading_dims_are_one_batched_product():
    d = describe(_Fn(lambda A, B: A @ B.mT), [torch.randn(2, 4, 5, 7), torch.randn(2, 4, 3, 7)])
    assert (d.gemm.batch, d.gemm.m, d.gemm.n, d.gemm.k, d.gemm.trans_b) == (8, 5, 3, 7, True)
    assert "self._gemm(A.reshape(-1, *A.shape[-2:]), B.reshape(-1, *B.shape[-2:]))" in d.forward_src


def test_integer_operands_are_not_a_gemm():
    model = _Fn(lambda A, B: A @ B)
    with pytest.raises(NotCovered, match="one dtype"):
        describe(model, [torch.randint(0, 3, (5, 7)), torch.randint(0, 3, (7, 3))])


@pytest.mark.parametrize("fn", [lambda A, B: torch.relu(A @ B), lambda A, B: (A * 2.0) @ B,
                                lambda A, B: A @ B + A @ B])
def test_anything_more_than_the_product_is_no_gemm(fn):
    try:
        d = describe(_Fn(fn), [torch.randn(4, 4), torch.randn(4, 4)])
    except NotCovered:
        return
    assert d.gemm is None


def test_tunable_defaults_split_k_only_when_k_is_long_next_to_the_output():
    square = gemm_tunable(Gemm(a="A", b="B", m=4096, n=4096, k=4096))
    assert square["SPLIT_K"][0] == 1 and square["BLOCK_M"][0] == TUNABLE_GEMM["BLOCK_M"][0]
    long_k = gemm_tunable(Gemm(a="A", b="B", m=256, n=256, k=524288))
    split = long_k["SPLIT_K"][0]
    tiles = (256 // long_k["BLOCK_M"][0]) * (256 // long_k["BLOCK_N"][0])
    assert split > 1 and tiles * split >= TARGET_PROGRAMS and tiles * split // 2 < TARGET_PROGRAMS
    assert 524288 // split >= 4 * long_k["BLOCK_K"][0]
    short_k = gemm_tunable(Gemm(a="A", b="B", m=256, n=256, k=256))
    assert short_k["SPLIT_K"][0] * 4 * short_k["BLOCK_K"][0] <= 256
    thin = gemm_tunable(Gemm(a="A", b="B", m=2048, n=1, k=1 << 20))
    assert thin["BLOCK_N"][0] == 16 and thin["SPLIT_K"][0] > 1


def test_the_c_backend_says_it_has_no_matrix_product_kernel():
    d = describe(_Fn(lambda A, B: A @ B), [torch.randn(4, 4), torch.randn(4, 4)])
    assert "no matrix-product kernel" in why_not_c(d)


# KernelBench level 1, problems 1-18 present in the shared folder: covered by the matrix
# product template, or not covered (with the reason's gist)
LEVEL1 = {
    "1_Square_matrix_multiplication_.py": None,
    "2_Standard_matrix_multiplication_.py": None,
    "4_Matrix_vector_multiplication_.py": None,  # B is (K, 1): a 2-D product with N = 1
    "6_Matmul_with_large_K_dimension_.py": None,
    "7_Matmul_with_small_K_dimension_.py": None,
    "9_Tall_skinny_matrix_multiplication_.py": None,
    "10_3D_tensor_matrix_multiplication.py": None,
    "11_4D_tensor_matrix_multiplication.py": None,  # einsum "bijl,lk->bijk"
    "14_Matmul_for_upper_triangular_matrices.py": "no fusable",  # triu of the product
    "15_Matmul_for_lower_triangular_matrices.py": "no fusable",  # tril of the product
    "16_Matmul_with_transposed_A.py": None,
    "17_Matmul_with_transposed_B.py": None,
}


@pytest.mark.parametrize("name,why", sorted(LEVEL1.items()))
def test_kernelbench_level1_matmul_problems(name, why):
    task = published_problem(KERNELBENCH / "level1" / name)
    reason = coverage(task)
    if why is None:
        assert reason is None
        assert describe_task(task).gemm is not None
        assert variants(task, "triton") == ("fused",)
    else:
        assert reason is not None and why in reason


def test_the_shipped_config_proposes_the_gemm_template_on_triton_and_mutates_its_params(tmp_path):
    import yaml
    from tests.templates.helpers import make_task

    from foundry.templates import TemplateConfig, TemplateProposer
    from foundry.types import ProposalRequest
    root = Path(__file__).resolve().parents[2]
    shipped = yaml.safe_load((root / "conf" / "templates" / "default.yaml").read_text())
    task = make_task(tmp_path, "mm", forward="return A @ B", sig="A, B",
                     inputs="[torch.randn(8, 3000), torch.randn(3000, 8)]")
    for config in (TemplateConfig(), TemplateConfig.from_config(shipped)):
        first = TemplateProposer(config=config).propose_sync(
            ProposalRequest(task=task, backend="triton", mode="translate"))
        assert first.source and first.origin == "template", first.note
        assert "_gemm[grid]" in first.source
    c = TemplateProposer().propose_sync(ProposalRequest(task=task, backend="c", mode="translate"))
    assert not c.source and "no matrix-product kernel" in c.note
    off = TemplateProposer(config=TemplateConfig(families=("pointwise",))).propose_sync(
        ProposalRequest(task=task, backend="triton", mode="translate"))
    assert not off.source and "matmul" in off.note
    child = TemplateProposer().propose_sync(
        ProposalRequest(task=task, backend="triton", mode="optimize", parent=first, generation=1))
    assert child.source and child.note.startswith("params: ") and child.params
