"""Template "conv" through Triton's interpreter on the CPU: the fused template with every
convolution module a Triton convolution (standard, transposed, depthwise, 1-3-D, without
bias, one module called twice), against the reference; where it applies; the suite's
level-2 convolution tasks at their small sizes."""

import os

os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402

pytest.importorskip("triton")

from tests.templates.helpers import assert_close, make_task, run_candidate  # noqa: E402

from foundry.tasks.suite import load_suite  # noqa: E402
from foundry.templates.engine import coverage, describe_task, emit, variants  # noqa: E402

BLOCKS = {"BLOCK": 64, "CONV_BLOCK_M": 16, "CONV_BLOCK_N": 16, "CONV_BLOCK_K": 16, "CONV_DW_BLOCK": 64}

CASES = [
    ("conv2d_relu_bias", "return torch.relu(self.conv(x)) + self.b",
     "self.conv = nn.Conv2d(3, 8, 3, padding=1)\nself.b = nn.Parameter(torch.randn(8, 1, 1))",
     "[torch.randn(2, 3, 9, 10)]"),
    ("transposed2d_strided_tanh", "return torch.tanh(self.up(x)) * 0.5",
     "self.up = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1)", "[torch.randn(2, 4, 5, 6)]"),
    ("conv3d_channel_softmax", "return torch.softmax(self.conv(x), dim=1)",
     "self.conv = nn.Conv3d(3, 5, (2, 3, 2), padding=(1, 0, 1), bias=False)", "[torch.randn(1, 3, 4, 6, 5)]"),
    ("depthwise_sigmoid", "return torch.sigmoid(self.dw(x)) + x",
     "self.dw = nn.Conv2d(4, 4, 3, padding=1, groups=4)", "[torch.randn(2, 4, 7, 8)]"),
    ("conv1d_same_gelu", "return F.gelu(self.conv(x))",
     "self.conv = nn.Conv1d(3, 5, 5, padding='same')", "[torch.randn(2, 3, 17)]"),
    ("one_module_twice", "return torch.relu(self.conv(torch.relu(self.conv(x))))",
     "self.conv = nn.Conv2d(4, 4, 3, padding=1)", "[torch.randn(1, 4, 6, 6)]"),
]


@pytest.mark.parametrize("f32_dot", ["tf32x3", "ieee"])
@pytest.mark.parametrize("name,forward,init,inputs", CASES, ids=[c[0] for c in CASES])
def test_conv_kernels_template(tmp_path, name, forward, init, inputs, f32_dot):
    task = make_task(tmp_path, name, forward=forward, sig="x", init=init, inputs=inputs)
    assert variants(task, "triton")[-1] == "conv"
    ref, got = run_candidate(task, backend="triton", variant="conv", params={**BLOCKS, "F32_DOT": f32_dot})
    assert_close(ref, got)


def test_every_convolution_call_is_swapped_and_the_tiles_are_its_own(tmp_path):
    task = make_task(tmp_path, "twice", forward=CASES[-1][1], sig="x", init=CASES[-1][2], inputs=CASES[-1][3])
    src = emit(task, backend="triton", variant="conv")
    forward = src[src.index("def forward"):]
    assert "self.conv(" not in forward and forward.count("self._conv0(") == 2
    assert "'CONV_BLOCK_M'" in src and "'BLOCK'" in src  # the regions keep their own BLOCK


@pytest.mark.parametrize("init", ["self.conv = nn.Conv2d(3, 4, 3, padding=1, padding_mode='reflect')",
                                  "self.conv = nn.Conv2d(3, 4, 4, padding='same')"])
def test_not_offered_where_the_kernels_do_not_take_a_convolution(tmp_path, init):
    # reflection padding; 'same' padding one side more than the other
    task = make_task(tmp_path, "no", forward="return torch.relu(self.conv(x))", sig="x", init=init,
                     inputs="[torch.randn(1, 3, 8, 8)]")
    assert describe_task(task).prologue_convs == ()
    assert variants(task, "triton") == ("fused",)


SUITE_CONVS = [t for t in load_suite(level=[2], profile="small")
               if coverage(t) is None and "conv" in variants(t, "triton")]


def test_the_suite_has_level_2_convolution_tasks_for_the_template():
    assert len(SUITE_CONVS) >= 10


@pytest.mark.parametrize("task", SUITE_CONVS, ids=lambda t: t.task_id)
def test_suite_convolution_tasks_with_conv_kernels(task):
    ref, got = run_candidate(task, backend="triton", variant="conv", params={"CONV_BLOCK_M": 64, "CONV_BLOCK_N": 32,
                                                                              "CONV_BLOCK_K": 32})
    assert_close(ref, got)
