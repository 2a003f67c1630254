"""The `c` backend's direct convolution (template `conv`): 1-3-D, strided, padded,
dilated, grouped and depthwise, with and without bias, alone and before fused regions,
against torch's convolution on the CPU; where it is offered; and the judge telling it from
a wrong one."""

import pytest
import torch

from tests.templates.helpers import assert_close, judge_c_sources, make_task, run_candidate

from foundry.templates.engine import emit, variants

CASES = [
    ("lenet_conv_relu_pool", "return torch.max_pool2d(torch.relu(self.conv(x)), [2, 2], [2, 2])",
     "self.conv = nn.Conv2d(1, 6, 5)", "[torch.rand(3, 1, 32, 32)]"),
    ("strided_padded_dilated", "return torch.relu(self.conv(x)) + self.b",
     "self.conv = nn.Conv2d(3, 10, (3, 4), stride=(2, 3), padding=(2, 1), dilation=(1, 2))\n"
     "self.b = nn.Parameter(torch.randn(10, 1, 1))", "[torch.randn(2, 3, 13, 21)]"),
    ("grouped_no_bias", "return torch.sigmoid(self.conv(x))",
     "self.conv = nn.Conv2d(6, 9, 3, padding=1, groups=3, bias=False)", "[torch.randn(2, 6, 7, 9)]"),
    ("depthwise", "return torch.relu(self.dw(x)) + x",
     "self.dw = nn.Conv2d(5, 5, 3, padding=1, groups=5)", "[torch.randn(2, 5, 8, 70)]"),
    ("conv1d_same", "return F.gelu(self.conv(x))", "self.conv = nn.Conv1d(3, 5, 5, padding='same')",
     "[torch.randn(2, 3, 150)]"),
    ("conv3d_asymmetric", "return torch.tanh(self.conv(x))",
     "self.conv = nn.Conv3d(2, 3, (2, 3, 1), stride=(1, 2, 1), padding=(1, 0, 2))", "[torch.randn(1, 2, 4, 7, 5)]"),
]


@pytest.mark.parametrize("params", [{}, {"CONV_OCB": 4, "CONV_OWT": 32}, {"CONV_OCB": 1, "CONV_OWT": 256}],
                         ids=["defaults", "ocb4_owt32", "ocb1_owt256"])
@pytest.mark.parametrize("name,forward,init,inputs", CASES, ids=[c[0] for c in CASES])
def test_the_c_convolution_before_regions_matches_torch(tmp_path, name, forward, init, inputs, params):
    task = make_task(tmp_path, name, forward=forward, sig="x", init=init, inputs=inputs)
    assert variants(task, "c") == ("fused", "conv")
    ref, got = run_candidate(task, backend="c", variant="conv", params=params)
    assert_close(ref, got)


def test_a_chain_of_convolutions_alone_is_the_conv_template_only(tmp_path):
    task = make_task(tmp_path, "chain", forward="return self.b(self.a(x))", sig="x",
                     init="self.a = nn.Conv2d(3, 4, 3, padding=1)\nself.b = nn.Conv2d(4, 2, 1, stride=2)",
                     inputs="[torch.randn(2, 3, 9, 11)]")
    assert variants(task, "c") == ("conv",)
    src = emit(task, backend="c", variant="conv")
    assert "foundry_conv" in src and "F.conv2d" not in src[src.index("class ModelNew"):]
    ref, got = run_candidate(task, backend="c", variant="conv")
    assert_close(ref, got)


def test_every_call_of_the_module_runs_the_c_convolution(tmp_path):
    task = make_task(tmp_path, "twice", forward="return torch.relu(self.conv(torch.relu(self.conv(x))))", sig="x",
                     init="self.conv = nn.Conv2d(4, 4, 3, padding=1)", inputs="[torch.randn(1, 4, 6, 6)]")
    src = emit(task, backend="c", variant="conv")
    forward = src[src.index("    def forward"):]
    assert "self.conv(" not in forward and forward.count("self._conv0(") == 2
    ref, got = run_candidate(task, backend="c", variant="conv")
    assert_close(ref, got)


def test_a_transposed_convolution_gets_no_c_convolution(tmp_path):
    task = make_task(tmp_path, "up", forward="return torch.relu(self.up(x))", sig="x",
                     init="self.up = nn.ConvTranspose2d(3, 4, 3, stride=2)", inputs="[torch.randn(1, 3, 5, 5)]")
    assert variants(task, "c") == ("fused",)


def test_the_judge_refuses_a_c_convolution_with_a_wrong_tap(tmp_path):
    task = make_task(tmp_path, "judged", forward=CASES[1][1], sig="x", init=CASES[1][2], inputs=CASES[1][3])
    honest = emit(task, backend="c", variant="conv")
    # the kernel's last tap never added: a plausible off-by-one in the tap loop
    wrong = honest.replace("for (int64_t kw = 0; kw < KW; kw++)", "for (int64_t kw = 0; kw + 1 < KW; kw++)")
    assert wrong != honest
    right, bad = judge_c_sources(task, (honest, wrong))
    assert right.correct and right.flags == (), right.error
    assert not bad.correct
