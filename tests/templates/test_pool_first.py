"""An average pooling moved in front of the pointwise convolution it follows
(foundry/templates/pool_first.py): which graphs are rewritten, that the rewritten graph
computes the same function, and the template candidates of a DenseNet transition layer
(BatchNorm, ReLU, 1 x 1 convolution, 2 x 2 average pooling) on both backends and through
the judge. A padded pooling is left alone: there the two orders differ, and a candidate
made by swapping them anyway is refused by the judge."""

import os

os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.fx as fx  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.fx.passes.shape_prop import ShapeProp  # noqa: E402

from foundry.templates.pool_first import pool_before_pointwise_convs  # noqa: E402
from foundry.templates.engine import describe_task, emit  # noqa: E402
from tests.templates.helpers import assert_close, judge_c_sources, make_task, run_candidate  # noqa: E402


class ConvThen(nn.Module):
    def __init__(self, conv: nn.Module, pool):
        super().__init__()
        self.conv, self.pool = conv, pool

    def forward(self, x):
        return self.pool(self.conv(x))


class Transition(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 16, 1, bias=False), nn.AvgPool2d(2, 2))

    def forward(self, x):
        return self.net(x)


class UsedTwice(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 6, 1)

    def forward(self, x):
        y = self.conv(x)
        return F.avg_pool2d(y, 2) + y[:, :, ::2, ::2]


def _rewritten(model, x):
    gm = fx.symbolic_trace(model)
    ShapeProp(gm).propagate(x)
    return gm, pool_before_pointwise_convs(gm)


def _order(gm) -> list:
    return [n.op for n in gm.graph.nodes if n.op in ("call_module", "call_function")]


REWRITTEN = {
    "densenet transition": (Transition, (2, 8, 12, 12)),
    "bias, overlapping windows": (lambda: ConvThen(nn.Conv2d(5, 7, 1), lambda y: F.avg_pool2d(y, 3, stride=2)),
                                  (2, 5, 11, 9)),
    "1-D": (lambda: ConvThen(nn.Conv1d(3, 4, 1), nn.AvgPool1d(4)), (2, 3, 16)),
    "3-D to one position": (lambda: ConvThen(nn.Conv3d(3, 5, 1), nn.AdaptiveAvgPool3d(1)), (2, 3, 4, 6, 6)),
    "ATen's avg_pool2d": (lambda: ConvThen(nn.Conv2d(3, 5, (1, 1), groups=1),
                                           lambda y: torch.ops.aten.avg_pool2d.default(y, [2, 2], [2, 2])),
                          (1, 3, 8, 8)),
    "grouped, 'valid'": (lambda: ConvThen(nn.Conv2d(4, 8, 1, groups=2, padding="valid"), nn.AvgPool2d((2, 3))),
                         (2, 4, 6, 9)),
}


@pytest.mark.parametrize("name", sorted(REWRITTEN))
def test_the_pooling_moves_before_a_pointwise_convolution_and_the_result_stays(name):
    make, shape = REWRITTEN[name]
    torch.manual_seed(0)
    model = make().eval()
    x = torch.randn(*shape)
    with torch.no_grad():
        for p in model.parameters():  # weights, biases and a BatchNorm's affine off their initial values
            p.add_(0.1 * torch.randn_like(p))
        want = model(x)
        gm, changed = _rewritten(model, x)
        got = gm(x)
    assert changed
    calls = [n for n in gm.graph.nodes if n.op in ("call_module", "call_function")]
    convs = [i for i, n in enumerate(calls) if n.op == "call_module" and isinstance(gm.get_submodule(n.target),
                                                                                    nn.modules.conv._ConvNd)]
    assert convs == [len(calls) - 1], [n.format_node() for n in calls]  # the convolution now comes last
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


KEPT = {
    "3 x 3 kernel": lambda: ConvThen(nn.Conv2d(3, 4, 3), nn.AvgPool2d(2)),
    "stride 2": lambda: ConvThen(nn.Conv2d(3, 4, 1, stride=2), nn.AvgPool2d(2)),
    "padded convolution": lambda: ConvThen(nn.Conv2d(3, 4, 1, padding=1), nn.AvgPool2d(2)),
    "max pooling": lambda: ConvThen(nn.Conv2d(3, 4, 1), nn.MaxPool2d(2)),
    "padded pooling": lambda: ConvThen(nn.Conv2d(3, 4, 1), nn.AvgPool2d(3, stride=2, padding=1)),
    "ceil mode": lambda: ConvThen(nn.Conv2d(3, 4, 1), nn.AvgPool2d(3, ceil_mode=True)),
    "divisor override": lambda: ConvThen(nn.Conv2d(3, 4, 1), nn.AvgPool2d(2, divisor_override=3)),
    "transposed": lambda: ConvThen(nn.ConvTranspose2d(3, 4, 1), nn.AvgPool2d(2)),
    "a mean that drops the dims": lambda: ConvThen(nn.Conv2d(3, 4, 1), lambda y: y.mean((2, 3))),
    "the convolution's output used twice": UsedTwice,
}


@pytest.mark.parametrize("name", sorted(KEPT))
def test_other_graphs_are_left_alone(name):
    model = KEPT[name]().eval()
    x = torch.randn(2, 3 if name != "the convolution's output used twice" else 4, 10, 10)
    gm, changed = _rewritten(model, x)
    assert not changed
    assert _order(gm) == _order(fx.symbolic_trace(model))


TRANSITION = dict(
    init="""
self.norm = nn.BatchNorm2d(8)
self.conv = nn.Conv2d(8, 16, 1, bias=False)
with torch.no_grad():
    self.norm.running_mean.uniform_(-0.2, 0.2)
    self.norm.running_var.uniform_(0.8, 1.2)
    self.norm.weight.uniform_(0.8, 1.2)
    self.norm.bias.uniform_(-0.2, 0.2)
""",
    forward="return F.avg_pool2d(self.conv(torch.relu(self.norm(x))), 2)", sig="x",
    inputs="[torch.rand(2, 8, 12, 10)]")


def test_a_transition_layer_is_one_pooling_region_then_the_convolution(tmp_path):
    desc = describe_task(make_task(tmp_path, "transition", **TRANSITION))
    assert [r.family for r in desc.regions] == ["pool"]  # BatchNorm, ReLU and the pooling: one kernel
    assert [p.kind for p in desc.prologues] == ["conv"]
    assert desc.forward_src.index("self._k0(") < desc.forward_src.index("self.conv(")


@pytest.mark.parametrize("backend", ["c", "triton"])
def test_the_transition_layers_candidate_computes_the_layer(tmp_path, backend):
    task = make_task(tmp_path, "transition", **TRANSITION)
    ref, got = run_candidate(task, backend=backend)
    assert got.shape == (2, 16, 6, 5)
    assert_close(ref, got)


def test_the_judge_passes_the_pooled_first_candidate_and_refuses_a_swap_past_padding(tmp_path):
    honest = make_task(tmp_path, "transition", **TRANSITION)
    # padded windows: in the task's order the convolution's bias is averaged with the
    # padding's zeros; a candidate that pools first (made from that order's own task) is wrong
    init = "self.conv = nn.Conv2d(8, 16, 1, bias=True)\nwith torch.no_grad():\n    self.conv.bias.fill_(2.0)"
    pool = "3, stride=2, padding=1, count_include_pad=True"
    padded = make_task(tmp_path, "padded", init=init, forward=f"return F.avg_pool2d(self.conv(x), {pool})",
                       sig="x", inputs="[torch.randn(2, 8, 12, 10)]")
    pooled_first = make_task(tmp_path, "pooled_first", init=init,
                             forward=f"return self.conv(F.avg_pool2d(x, {pool}))", sig="x",
                             inputs="[torch.randn(2, 8, 12, 10)]")
    assert [r.family for r in describe_task(padded).regions] == ["pool"]
    assert describe_task(padded).forward_src.index("self.conv(") < describe_task(padded).forward_src.index("_k0(")
    honest_result, = judge_c_sources(honest, [emit(honest, backend="c")])
    assert honest_result.correct and honest_result.flags == (), honest_result.error
    swapped_result, = judge_c_sources(padded, [emit(pooled_first, backend="c")])
    assert not swapped_result.correct and "max abs error" in (swapped_result.error or ""), swapped_result.error
