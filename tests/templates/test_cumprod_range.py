"""A cumulative product whose running value leaves float32's range and comes back: the
templates multiply in double precision, as torch's CPU scan does, so the result is finite
where the product in order is (in float32 the second 1e30 would make it inf for good)."""

import os

os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402
import torch  # noqa: E402

from tests.templates.helpers import assert_close, make_task, run_candidate  # noqa: E402

# each row: 1e30, 1e30, 1e-30, 1e-30, repeated; the running product 1e30, 1e60, 1e30, 1, ...
OUT_AND_BACK = "[torch.tensor([[1e30, 1e30, 1e-30, 1e-30] * 10] * 3)]"


@pytest.mark.parametrize("backend", ["c", "triton"])
def test_a_running_product_beyond_float32_and_back_stays_finite(tmp_path, backend):
    task = make_task(tmp_path, "out_and_back", forward="return torch.cumprod(x, dim=1)", sig="x",
                     inputs=OUT_AND_BACK)
    ref, got = run_candidate(task, backend=backend, params={"BLOCK": 16})
    assert torch.isinf(ref[:, 1]).all() and torch.isfinite(ref[:, 2:4]).all()  # torch: in double, then cast
    assert_close(ref, got)
