"""A pooling region's pointwise work before and after the pooling, with an operand of each
broadcast layout: the full input's shape, per channel (as a BatchNorm's), per position
and per channel and position. The Triton pooling kernels read such operands at the tile
row's (sample, channel) plane where the phase's rows are those planes (no 64-bit division
per element and tap); each layout must land on the same elements as torch's broadcast."""

import os

os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402

from foundry.templates.engine import describe_task, emit  # noqa: E402
from tests.templates.helpers import assert_close, make_task, run_candidate  # noqa: E402

INIT = """
self.scale = nn.Parameter(torch.rand(5, 1, 1) + 0.5)
self.where = nn.Parameter(torch.randn(9, 7))
self.both = nn.Parameter(torch.randn(5, 9, 7))
self.after = nn.Parameter(torch.randn(5, 1, 1))
self.spot = nn.Parameter(torch.randn(OUT_H, OUT_W))
"""

POOLS = {  # (pooling call, its output's height and width on a 9 x 7 input)
    "2x2": ("F.avg_pool2d(y, 2)", 4, 3),
    "3x3 strided padded": ("F.avg_pool2d(y, 3, stride=2, padding=1)", 5, 4),
    "max 3x2": ("F.max_pool2d(y, (3, 2), stride=(2, 1))", 4, 6),
    "stride 1, chunked": ("F.max_pool2d(y, (1, 3), stride=1, padding=(0, 1))", 9, 7),
}


@pytest.mark.parametrize("backend", ["triton", "c"])
@pytest.mark.parametrize("pool", sorted(POOLS))
def test_pooling_with_operands_of_every_layout_matches_torch(tmp_path, pool, backend):
    call, out_h, out_w = POOLS[pool]
    forward = (f"y = torch.relu(x * self.scale + self.where + self.both + z)\n"
               f"return {call} * self.after + self.spot")
    task = make_task(tmp_path, "pool_operands", forward=forward,
                     init=INIT.replace("OUT_H", str(out_h)).replace("OUT_W", str(out_w)),
                     inputs="[torch.randn(3, 5, 9, 7), torch.randn(3, 5, 9, 7)]", sig="x, z")
    desc = describe_task(task)
    assert [r.family for r in desc.regions] == ["pool"]
    region = desc.regions[0]
    assert {o.layout for o in region.pre.operands} == {"full", "row", "col", "rowcol"}
    assert {o.layout for o in region.post.operands} == {"row", "col"}
    if backend == "triton":
        assert "nc % M" in emit(task, backend="triton")  # read at the plane, not (f // K) % M
    ref, got = run_candidate(task, backend=backend, params={"BLOCK": 64})
    assert_close(ref, got)
