"""The Triton norm kernels' statistics, taken in one pass (each lane's count, mean and sum
of squared deviations, Welford's update, merged across lanes and chunks): rows longer than
a block and split over several programs, with a mean 100 times their spread (the sum of
squares less the squared mean, a one-pass shortcut, misses the tolerance there) and
heavy-tailed."""

import os

os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402

from tests.templates.helpers import assert_close, make_task, run_candidate  # noqa: E402

ROWS = {
    "far from zero": "[100.0 + torch.randn(3, 4, 3000)]",
    "heavy-tailed": "[torch.randn(3, 4, 3000) * torch.exp(1.5 * torch.randn(3, 4, 3000).abs())]",
}


@pytest.mark.parametrize("split", [1, 4])
@pytest.mark.parametrize("rows", sorted(ROWS))
@pytest.mark.parametrize("norm,init", [("layer", "nn.LayerNorm(3000)"), ("group", "nn.GroupNorm(2, 4)"),
                                       ("instance", "nn.InstanceNorm1d(4)")])
def test_norm_statistics_in_one_pass_match_torch(tmp_path, norm, init, rows, split):
    task = make_task(tmp_path, f"{norm}_norm", forward="return self.n(x)", init=f"self.n = {init}",
                     inputs=ROWS[rows], sig="x")
    ref, got = run_candidate(task, backend="triton", params={"BLOCK": 256, "SPLIT": split})
    assert_close(ref, got, atol=2e-4, rtol=2e-4)
