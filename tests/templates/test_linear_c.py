"""The `c` backend's Linear kernel (template `linear`): with and without bias, rows not a
multiple of the row block, K not a multiple of the vector width, leading dims, before a
fused region and alone; where it is offered; and the judge telling it from a wrong one."""

import pytest
import torch

from tests.templates.helpers import assert_close, judge_c_sources, make_task, run_candidate

from foundry.templates.engine import emit, variants

CASES = [
    ("mlp_layer", "return torch.relu(self.fc(x))", "self.fc = nn.Linear(37, 21)", "[torch.rand(2, 37)]"),
    ("no_bias_odd_rows", "return torch.tanh(self.fc(x))", "self.fc = nn.Linear(64, 19, bias=False)",
     "[torch.randn(5, 64)]"),
    ("leading_dims", "return F.gelu(self.fc(x)) * 2.0", "self.fc = nn.Linear(24, 40)", "[torch.randn(3, 4, 24)]"),
    ("two_linears", "return self.b(torch.relu(self.a(x)))",
     "self.a = nn.Linear(30, 17)\nself.b = nn.Linear(17, 9)", "[torch.randn(7, 30)]"),
]


@pytest.mark.parametrize("params", [{}, {"LIN_NR": 4, "LIN_MR": 4}, {"LIN_NR": 16, "LIN_MR": 1}],
                         ids=["defaults", "nr4_mr4", "nr16_mr1"])
@pytest.mark.parametrize("name,forward,init,inputs", CASES, ids=[c[0] for c in CASES])
def test_the_c_linear_before_regions_matches_torch(tmp_path, name, forward, init, inputs, params):
    task = make_task(tmp_path, name, forward=forward, sig="x", init=init, inputs=inputs)
    assert variants(task, "c") == ("fused", "linear")
    src = emit(task, backend="c", variant="linear", params=params)
    forward_src = src[src.index("    def forward"):]
    assert "self._lin0(" in forward_src and "self.fc(" not in forward_src and "self.a(" not in forward_src
    ref, got = run_candidate(task, backend="c", variant="linear", params=params)
    assert_close(ref, got)


def test_a_lone_linear_is_the_linear_template_only(tmp_path):
    task = make_task(tmp_path, "lone", forward="return self.fc(x)", sig="x", init="self.fc = nn.Linear(33, 65)",
                     inputs="[torch.randn(3, 33)]")
    assert variants(task, "c") == ("linear",)
    ref, got = run_candidate(task, backend="c", variant="linear")
    assert_close(ref, got)


def test_a_product_of_two_inputs_gets_no_c_template(tmp_path):
    from foundry.templates.backend_c import why_not_c
    from foundry.templates.engine import describe_task

    task = make_task(tmp_path, "mm", forward="return torch.relu(x @ y)", sig="x, y",
                     inputs="[torch.randn(4, 8), torch.randn(8, 5)]")
    assert "linear" not in variants(task, "c")
    lone = make_task(tmp_path, "lone_mm", forward="return x @ y", sig="x, y",
                     inputs="[torch.randn(4, 8), torch.randn(8, 5)]")
    assert why_not_c(describe_task(lone)) is not None


def test_the_judge_refuses_a_c_linear_that_drops_the_tail(tmp_path):
    task = make_task(tmp_path, "judged", forward=CASES[0][1], sig="x", init=CASES[0][2], inputs=CASES[0][3])
    honest = emit(task, backend="c", variant="linear")
    # the products' last elements (K not a multiple of the vector width) never added
    wrong = honest.replace("for (int64_t k = KV; k < K; k++)", "for (int64_t k = K; k < K; k++)")
    assert wrong != honest
    right, bad = judge_c_sources(task, (honest, wrong))
    assert right.correct and right.flags == (), right.error
    assert not bad.correct
