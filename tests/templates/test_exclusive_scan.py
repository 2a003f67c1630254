"""Exclusive cumsums written as cat + zeros + slice + cumsum are read as one exclusive scan
(foundry/templates/scan_patterns.py) and run as one kernel on the C backend and through
Triton's interpreter; look-alikes that are not exclusive scans keep their torch calls."""

import os

os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402

from tests.templates.helpers import assert_close, make_task, run_candidate  # noqa: E402

from foundry.templates.engine import describe_task, emit  # noqa: E402

X2 = "[torch.randn(5, 37)]"
X3 = "[torch.randn(3, 9, 6)]"

EXCLUSIVE = [
    # the shifted input scanned (the suite's level1/41)
    ("shift_then_scan", "return torch.cumsum(torch.cat([torch.zeros_like(x[:, :1]), x[:, :-1]], dim=1), dim=1)", X2),
    # the scan of all but the last, shifted (KernelBench's level1/92)
    ("scan_then_shift", "c = torch.cumsum(x.narrow(dim=1, start=0, length=x.size(1) - 1), dim=1)\n"
                        "return torch.cat((torch.zeros_like(x.select(1, 0).unsqueeze(1)), c), dim=1)", X2),
    # along a middle dim (the column scan), zeros from torch.zeros
    ("middle_dim", "z = torch.zeros(3, 1, 6, device=x.device)\n"
                   "return torch.cat([z, x[:, :-1, :]], dim=-2).cumsum(1)", X3),
    # a pointwise chain before it and after it, fused into the same kernel
    ("with_chains", "y = torch.tanh(x) * 2.0\n"
                    "return torch.sigmoid(torch.cumsum(torch.cat([y.new_zeros(5, 1), y[:, 0:36]], 1), 1))", X2),
]

NOT_EXCLUSIVE = [
    ("zeros_last", "return torch.cumsum(torch.cat([x[:, :-1], torch.zeros_like(x[:, :1])], dim=1), dim=1)"),
    ("drops_the_first", "return torch.cumsum(torch.cat([torch.zeros_like(x[:, :1]), x[:, 1:]], dim=1), dim=1)"),
    ("two_zeros", "return torch.cumsum(torch.cat([torch.zeros_like(x[:, :2]), x[:, :-2]], dim=1), dim=1)"),
    ("ones", "return torch.cumsum(torch.cat([torch.ones_like(x[:, :1]), x[:, :-1]], dim=1), dim=1)"),
]


def _scan_rows(task):
    return [r.row for r in describe_task(task).regions if r.row is not None and r.row.family == "scan"]


@pytest.mark.parametrize("name,forward,inputs", EXCLUSIVE, ids=[c[0] for c in EXCLUSIVE])
@pytest.mark.parametrize("backend", ["c", "triton"])
def test_exclusive_cumsum_is_one_scan(tmp_path, name, forward, inputs, backend):
    task = make_task(tmp_path, name, forward=forward, sig="x", inputs=inputs)
    rows = _scan_rows(task)
    assert len(rows) == 1 and rows[0].exclusive and rows[0].kind == "cumsum"
    forward_src = emit(task, backend=backend).split("class ModelNew", 1)[1]
    assert "cat(" not in forward_src and "zeros" not in forward_src  # no torch call left but the kernel's
    ref, got = run_candidate(task, backend=backend, params={"BLOCK": 16})
    assert_close(ref, got)


@pytest.mark.parametrize("name,forward", NOT_EXCLUSIVE, ids=[c[0] for c in NOT_EXCLUSIVE])
def test_look_alikes_are_not_exclusive_scans(tmp_path, name, forward):
    task = make_task(tmp_path, name, forward=forward, sig="x", inputs=X2)
    assert not any(row.exclusive for row in _scan_rows(task))
    ref, got = run_candidate(task, backend="triton", params={"BLOCK": 16})
    assert_close(ref, got)
