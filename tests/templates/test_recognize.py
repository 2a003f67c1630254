"""Recognition: which op families a forward is read into, and what is not covered."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from foundry.templates.recognize import NotCovered, choose_split, describe, layout_of


def _desc(model, *inputs):
    return describe(model, list(inputs))


class _Chain(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 6)
        self.b = nn.Parameter(torch.randn(6))

    def forward(self, x):
        return torch.sigmoid(F.gelu(self.lin(x)) + self.b) * 2.0


def test_linear_then_pointwise_chain_is_one_region_with_a_linear_prologue():
    d = _desc(_Chain(), torch.randn(3, 8))
    assert len(d.regions) == 1
    r = d.regions[0]
    assert r.row is None
    assert [i.op for i in r.pre.body] == ["gelu", "add", "sigmoid", "mul"]
    assert [o.layout for o in r.pre.operands] == ["full", "col"]
    assert d.linear_epilogue == "lin"
    assert [p.kind for p in d.prologues] == ["linear"]
    assert "self.lin(" in d.forward_src and "self._k0(" in d.forward_src


class _ConvNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bias = nn.Parameter(torch.randn(4, 1, 1))
        self.gn = nn.GroupNorm(2, 4)

    def forward(self, x):
        return torch.tanh(self.gn(torch.relu(self.conv(x)) + self.bias))


def test_conv_bias_groupnorm_tanh_fuses_into_one_norm_region():
    d = _desc(_ConvNorm(), torch.randn(2, 3, 8, 8))
    (r,) = d.regions
    assert (r.row.family, r.row.kind, r.row.groups) == ("norm", "group", 2)
    assert [o.layout for o in r.pre.operands] == ["full", "row"]
    assert r.pre.split == 2 and r.pre.operands[1].row_from == 1
    assert [i.op for i in r.post.body] == ["tanh"]
    assert r.row.weight and r.row.bias
    assert [p.kind for p in d.prologues] == ["conv"]


@pytest.mark.parametrize("expr,family,kind", [
    (lambda x: x.sum(dim=1), "reduce", "sum"),
    (lambda x: torch.mean(x, dim=-1, keepdim=True), "reduce", "mean"),
    (lambda x: torch.max(x, dim=1)[0], "reduce", "max"),
    (lambda x: torch.max(x, dim=1)[1], "reduce", "argmax"),
    (lambda x: torch.argmin(x, dim=2), "reduce", "argmin"),
    (lambda x: torch.logsumexp(x, dim=1), "reduce", "logsumexp"),
    (lambda x: torch.norm(x, p=2, dim=1), "reduce", "norm_l2"),
    (lambda x: torch.softmax(x, dim=-1), "softmax", "softmax"),
    (lambda x: F.log_softmax(x, dim=1), "softmax", "log_softmax"),
    (lambda x: torch.cumsum(x, dim=1), "scan", "cumsum"),
    (lambda x: torch.cumprod(x, dim=2), "scan", "cumprod"),
])
def test_row_ops(expr, family, kind):
    class M(nn.Module):
        def forward(self, x):
            return expr(x)
    (r,) = _desc(M(), torch.randn(2, 5, 7)).regions
    assert (r.row.family, r.row.kind) == (family, kind)


def test_reverse_cumsum_through_flips():
    class M(nn.Module):
        def forward(self, x):
            return x.flip(1).cumsum(1).flip(1)
    d = _desc(M(), torch.randn(3, 9))
    (r,) = d.regions
    assert r.row.kind == "cumsum" and r.row.reverse
    assert "flip" not in d.forward_src


def test_reduction_over_a_size_one_dim_is_folded_as_identity():
    class M(nn.Module):
        def forward(self, x):
            y = x.sum(dim=1, keepdim=True)
            return torch.max(y, dim=1, keepdim=True)[0] * 2.0
    d = _desc(M(), torch.randn(3, 9))
    assert len(d.regions) == 1
    assert d.regions[0].post is not None and [i.op for i in d.regions[0].post.body][-1] == "mul"


def test_intermediate_used_outside_splits_the_region():
    class M(nn.Module):
        def forward(self, x):
            a = torch.relu(x)
            b = torch.sigmoid(a)
            return b, a.sum()
    d = _desc(M(), torch.randn(3, 9))
    assert len(d.regions) >= 2


@pytest.mark.parametrize("model,inputs,why", [
    (nn.Linear(4, 4), [torch.randn(2, 4)], "no fusable"),
    (nn.MaxPool2d(2, ceil_mode=True), [torch.randn(1, 1, 5, 5)], "no fusable"),
    (nn.AdaptiveAvgPool2d(2), [torch.randn(1, 1, 6, 6)], "no fusable"),  # only the global one is a mean
    (nn.MaxPool3d(2, ceil_mode=True), [torch.randn(1, 1, 5, 5, 5)], "no fusable"),
    (nn.AvgPool2d(2, divisor_override=3), [torch.randn(1, 1, 4, 4)], "no fusable"),
])
def test_not_covered(model, inputs, why):
    with pytest.raises(NotCovered, match=why):
        describe(model, inputs)


def test_pooling_over_one_to_three_dims_is_one_window_and_global_average_a_mean():
    d = _desc(nn.MaxPool1d(4, stride=1, padding=2, dilation=3), torch.randn(2, 3, 20))
    row = d.regions[0].row
    assert (row.family, row.kind, row.dim_start, row.dim_end) == ("pool", "max", 2, 3)
    assert row.window.as_3d() == ((1, 1, 4), (1, 1, 1), (0, 0, 2), (1, 1, 3))
    pool = nn.AvgPool3d(3, stride=2, padding=1, count_include_pad=False)
    row = _desc(pool, torch.randn(1, 2, 5, 6, 7)).regions[0].row
    assert (row.kind, row.dim_start, row.dim_end, row.window.dims) == ("avg", 2, 5, 3)
    assert not row.window.count_include_pad
    row = _desc(nn.AdaptiveAvgPool3d((1, 1, 1)), torch.randn(1, 2, 5, 6, 7)).regions[0].row
    assert (row.family, row.kind, row.dim_start, row.dim_end, row.keepdim) == ("reduce", "mean", 2, 5, True)


def test_untraceable_forward_is_not_covered():
    class M(nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return torch.relu(x)
            return x
    with pytest.raises(NotCovered, match="torch.fx"):
        describe(M(), [torch.randn(3)])


def test_layouts_and_split():
    s = (2, 6, 5, 4)
    assert choose_split(s, [s, (6, 1, 1)]) == 2
    assert layout_of((6, 1, 1), s, 2).layout == "row"
    assert layout_of((4,), s, 0) is None
    assert layout_of((4,), s, 3).layout == "col"
    assert layout_of((2, 1, 5, 4), s, 0) is None
    assert choose_split(s, [(2, 1, 5, 4)]) is None
    assert layout_of((), s, 3).layout == "scalar"


@pytest.mark.parametrize("body,why", [
    (lambda x: F.max_pool2d(torch.relu(x), 2, ceil_mode=True), "max_pool2d would stay a torch op"),
    (lambda x: torch.sort(torch.relu(x), dim=-1)[0], "sort would stay a torch op"),
])
def test_leftover_compute_is_not_covered(body, why):
    class M(nn.Module):
        def forward(self, x):
            return body(x)
    with pytest.raises(NotCovered, match=why):
        describe(M(), [torch.randn(1, 2, 4, 4)])


def test_batch_norm_in_eval_becomes_pointwise_with_channel_views():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = nn.BatchNorm2d(3).eval()

        def forward(self, x):
            return self.bn(x)
    d = describe(M(), [torch.randn(2, 3, 4, 4)])
    (r,) = d.regions
    assert r.row is None and {"sub", "rsqrt", "mul", "add"} <= {i.op for i in r.pre.body}
    assert r.pre.split == 2 and all(o.layout in ("full", "row") for o in r.pre.operands)
    assert ".view(" in d.forward_src


def test_batch_norm_in_training_mode_is_not_covered():
    with pytest.raises(NotCovered, match="BatchNorm2d"):
        describe(nn.Sequential(nn.BatchNorm2d(3), nn.ReLU()), [torch.randn(2, 3, 4, 4)])


def test_a_value_used_twice_inside_the_chain_stays_one_region():
    class M(nn.Module):
        def forward(self, a, b):
            d = torch.abs(a - b)
            m = torch.clamp(d, max=0.5)
            return (m * m + (d - m)).mean(dim=1)
    d = describe(M(), [torch.randn(3, 8), torch.randn(3, 8)])
    (r,) = d.regions
    assert r.row.kind == "mean" and len(r.pre.body) >= 5


@pytest.mark.parametrize("body,why", [
    (lambda a, b: F.kl_div(a, b.abs(), reduction="none"), "kl_div would stay a torch op"),
    (lambda a, b: F.cosine_similarity(torch.relu(a), b[:1], dim=1), "cosine_similarity would stay a torch op"),
])
def test_losses_left_to_torch_where_the_rewrite_would_change_the_answer(body, why):
    """kl_div with a plain target (torch's xlogy makes 0 log 0 = 0) and cosine similarity of
    broadcasting operands are not rewritten."""
    class M(nn.Module):
        def forward(self, a, b):
            return body(a, b)
    with pytest.raises(NotCovered, match=why):
        describe(M(), [torch.randn(3, 8), torch.randn(3, 8)])


def test_a_forward_in_another_float_type_is_named_as_the_reason():
    class Gelu(nn.Module):
        def forward(self, x):
            return F.gelu(x)
    with pytest.raises(NotCovered, match="float16 only; this forward computes in float64"):
        describe(Gelu(), [torch.randn(4, 8, dtype=torch.float64)])
    assert describe(Gelu(), [torch.randn(4, 8)])  # the same op in float32 is covered
    assert describe(Gelu(), [torch.randn(4, 8, dtype=torch.bfloat16)]).half_dtypes == ("bfloat16",)


class _Attention(nn.Module):
    def __init__(self, **kwargs):
        super().__init__()
        self.kwargs = kwargs

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, **self.kwargs)


@pytest.mark.parametrize("kwargs,scale", [({}, 8 ** -0.5), ({"scale": 0.3}, 0.3)])
def test_attention_is_two_products_around_a_scaled_softmax(kwargs, scale):
    q, k, v = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 7, 8), torch.randn(2, 3, 7, 4)
    d = _desc(_Attention(**kwargs), q, k, v)
    (r,) = d.regions
    assert r.row.kind == "softmax" and (r.row.dim_start, r.row.dim_end) == (3, 4)
    assert [i.op for i in r.pre.body] == ["mul"] and r.pre.body[0].args[1].value == pytest.approx(scale)
    assert [p.kind for p in d.prologues] == ["matmul", "matmul"]


@pytest.mark.parametrize("kwargs", [{"is_causal": True}, {"dropout_p": 0.1}, {"enable_gqa": True}])
def test_attention_with_causality_dropout_or_grouped_heads_is_not_covered(kwargs):
    q = torch.randn(2, 4, 5, 8)
    with pytest.raises(NotCovered):
        _desc(_Attention(**kwargs), q, q, q)
