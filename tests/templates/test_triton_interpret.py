"""Triton templates through Triton's interpreter on the CPU (TRITON_INTERPRET=1 is set
before any candidate defines its kernels; tiny shapes: the interpreter is slow)."""

import os

os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402

pytest.importorskip("triton")

from tests.templates.cases import CASES  # noqa: E402
from tests.templates.helpers import TASKS, assert_close, make_task, run_candidate  # noqa: E402

from foundry.tasks import load_task  # noqa: E402
from foundry.tasks.suite import load_suite  # noqa: E402
from foundry.templates.engine import emit, variants  # noqa: E402
from foundry.tuning.inprocess import load_candidate  # noqa: E402

TRITON_CASES = CASES  # the interpreter is fast enough for every case at these shapes


@pytest.mark.parametrize("name,forward,init,init_args,inputs", TRITON_CASES, ids=[c[0] for c in TRITON_CASES])
def test_case_matches_reference_in_triton(tmp_path, name, forward, init, init_args, inputs):
    task = make_task(tmp_path, name, forward=forward, init=init, init_args=init_args, inputs=inputs)
    ref, got = run_candidate(task, backend="triton", params={"BLOCK": 16, "SPLIT": 2})
    assert_close(ref, got)


def test_matmul_epilogue_template(tmp_path):
    task = make_task(tmp_path, "mm", forward="return F.gelu(self.l(x)) * self.s + self.b", sig="x",
                     init="self.l = nn.Linear(33, 20)\nself.b = nn.Parameter(torch.randn(20))\nself.s = 0.5",
                     inputs="[torch.randn(5, 33)]")
    assert "matmul" in variants(task, "triton")
    ref, got = run_candidate(task, backend="triton", variant="matmul",
                             params={"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16})
    assert_close(ref, got)


def test_matmul_epilogue_template_at_few_rows_defaults_to_tiles_of_16_rows(tmp_path):
    """A Linear of 5 rows (a batch-8 RNN cell's is 8): the default tile is 16 rows, not 128
    (120 rows of padding); the candidate at its own defaults matches the reference."""
    task = make_task(tmp_path, "mm_rows", forward="return torch.tanh(self.l(x))", sig="x",
                     init="self.l = nn.Linear(40, 20)", inputs="[torch.randn(5, 40)]")
    src = emit(task, backend="triton", variant="matmul")
    params = load_candidate(src, {}).PARAMS
    assert params["BLOCK_M"] == 16 and params["BLOCK_N"] == 32
    ref, got = run_candidate(task, backend="triton", variant="matmul")
    assert_close(ref, got)


def test_linear_kernels_template_at_few_rows_defaults_to_tiles_of_16_rows(tmp_path):
    """Two Linears of 2 x 5 rows: LIN_BLOCK_M's default is 16, not 128; the candidate at its
    own defaults matches the reference."""
    task = make_task(tmp_path, "lin_rows", forward="return self.b(torch.relu(self.a(x)))", sig="x",
                     init="self.a = nn.Linear(24, 20)\nself.b = nn.Linear(20, 9)", inputs="[torch.randn(2, 5, 24)]")
    assert "linear" in variants(task, "triton")
    src = emit(task, backend="triton", variant="linear")
    assert load_candidate(src, {}).PARAMS["LIN_BLOCK_M"] == 16
    ref, got = run_candidate(task, backend="triton", variant="linear")
    assert_close(ref, got)


@pytest.mark.parametrize("path", sorted(TASKS.glob("*.py")), ids=lambda p: p.stem)
def test_task_files_match_reference_in_triton(path):
    task = load_task(path, profile="small")
    ref, got = run_candidate(task, backend="triton", params={"BLOCK": 1024, "SPLIT": 4})
    assert_close(ref, got)


@pytest.mark.parametrize("name,forward,init,inputs", [
    ("softmax_after", "return torch.softmax(self.l(x), dim=1)", "self.l = nn.Linear(33, 20)", "[torch.randn(5, 33)]"),
    ("batched_input_no_bias", "return torch.tanh(self.l(x)).sum(dim=-1)", "self.l = nn.Linear(19, 7, bias=False)",
     "[torch.randn(3, 4, 19)]"),
    ("two_linears", "return self.b(torch.relu(self.a(x))) * 2.0",
     "self.a = nn.Linear(17, 24)\nself.b = nn.Linear(24, 9)", "[torch.randn(6, 17)]"),
    ("one_linear_twice", "return torch.sigmoid(self.l(torch.relu(self.l(x))))", "self.l = nn.Linear(12, 12)",
     "[torch.randn(4, 12)]"),
])
@pytest.mark.parametrize("f32_dot", ["tf32x3", "ieee"])
def test_linear_kernels_template(tmp_path, name, forward, init, inputs, f32_dot):
    task = make_task(tmp_path, name, forward=forward, sig="x", init=init, inputs=inputs)
    assert "linear" in variants(task, "triton")
    ref, got = run_candidate(task, backend="triton", variant="linear",
                             params={"BLOCK": 16, "LIN_BLOCK_M": 16, "LIN_BLOCK_N": 16, "LIN_BLOCK_K": 16,
                                     "F32_DOT": f32_dot})
    assert_close(ref, got)


# the suite's Linear tasks whose Linear no other Triton template runs (a row reduction,
# norm, softmax or scan follows it)
SUITE_GEMMS = [t for t in load_suite(level=[2], profile="small") if "_Gemm_" in t.task_id
               and "matmul" not in variants(t, "triton")]


@pytest.mark.parametrize("task", SUITE_GEMMS, ids=lambda t: t.task_id)
def test_suite_gemm_tasks_with_linear_kernels(task):
    assert "linear" in variants(task, "triton")
    ref, got = run_candidate(task, backend="triton", variant="linear",
                             params={"LIN_BLOCK_M": 64, "LIN_BLOCK_N": 64, "LIN_BLOCK_K": 64})
    assert_close(ref, got)


@pytest.mark.parametrize("module,form", [
    ("nn.MaxPool1d(8, stride=1, padding=4, dilation=3)", "chunks"),  # taps at -4, -1, 2, ...: mixed alignments
    ("nn.AvgPool1d(3, stride=1, padding=1)", "chunks"),
    ("nn.AvgPool1d(3, stride=1, padding=1, count_include_pad=False)", "runtime shift"),  # its count per tap
    ("nn.MaxPool1d(17, stride=1, padding=8)", "runtime shift"),  # more taps than W_CHUNKED_TAPS
    ("nn.MaxPool1d(4, stride=1, padding=0, dilation=4)", "tile"),  # every tap 16-byte aligned
    ("nn.AvgPool1d(3, stride=2, padding=1)", "tile"),  # strided: no tap's load is contiguous
])
def test_pooling_reads_w_in_chunks_or_at_a_runtime_offset_only_where_tap_alignments_differ(tmp_path, module, form):
    from foundry.templates.engine import emit
    task = make_task(tmp_path, "pool", forward="return self.p(x)", sig="x", init=f"self.p = {module}",
                     inputs="[torch.randn(2, 3, 40)]")
    src = emit(task, backend="triton")
    assert ("@triton.jit(do_not_specialize=['W_SHIFT'])" in src) is (form == "runtime shift")
    assert ("tl.split(x_even)" in src) is (form == "chunks")
    for block in (16, 256):  # one output row per program, and 4-8 (outputs 20-41 wide)
        ref, got = run_candidate(task, backend="triton", params={"BLOCK": block})
        assert_close(ref, got)


@pytest.mark.parametrize("module,first", [
    ("nn.AvgPool3d(3, stride=2, padding=1)", 256),  # 27 taps: a smaller tile first
    ("nn.MaxPool2d(4, stride=4)", 256),  # 16 taps
    ("nn.MaxPool1d(8, stride=1, padding=4, dilation=3)", 1024),  # 8 taps: the usual tile first
])
def test_wide_pooling_windows_try_smaller_tiles_first(tmp_path, module, first):
    from foundry.templates.engine import emit
    from foundry.tuning.space import defaults, read_tunable
    shape = "[torch.randn(2, 3, 8, 8, 8)]" if "3d" in module else \
        "[torch.randn(2, 3, 8, 8)]" if "2d" in module else "[torch.randn(2, 3, 40)]"
    task = make_task(tmp_path, "pool", forward="return self.p(x)", sig="x", init=f"self.p = {module}", inputs=shape)
    space = read_tunable(emit(task, backend="triton"))
    assert defaults(space)["BLOCK"] == first and sorted(space["BLOCK"]) == [256, 512, 1024, 2048, 4096]
