"""Triton templates through Triton's interpreter on the CPU (TRITON_INTERPRET=1 is set
before any candidate defines its kernels; tiny shapes: the interpreter is slow)."""

import os

os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402

pytest.importorskip("triton")

from tests.templates.cases import CASES  # noqa: E402
from tests.templates.helpers import TASKS, assert_close, make_task, run_candidate  # noqa: E402

from foundry.tasks import load_task  # noqa: E402
from foundry.templates.engine import variants  # noqa: E402

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


@pytest.mark.parametrize("path", sorted(TASKS.glob("*.py")), ids=lambda p: p.stem)
def test_task_files_match_reference_in_triton(path):
    task = load_task(path, profile="small")
    ref, got = run_candidate(task, backend="triton", params={"BLOCK": 1024, "SPLIT": 4})
    assert_close(ref, got)
