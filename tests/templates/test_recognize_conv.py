"""Recognition of a forward that is only a chain of convolution modules (the Triton
convolution template): which forms are read into `Conv`s, which stay not covered and
why, and which of the KernelBench level-1 convolution problems it covers at their
published sizes (read on the meta device, as the engine does: nothing is allocated)."""

from pathlib import Path

import pytest
import torch
import torch.nn as nn

from tests.templates.helpers import published_problem
from foundry.templates.backend_c import why_not_c
from foundry.templates.conv_triton import conv_tunable
from foundry.templates.engine import coverage, describe_task, variants
from foundry.templates.recognize import NotCovered, describe

ROOT = Path(__file__).resolve().parents[2]
KERNELBENCH = ROOT.parent / "shared" / "kernelbench"


class _Chain(nn.Module):
    def __init__(self, *convs):
        super().__init__()
        self.convs = nn.ModuleList(convs)

    def forward(self, x):
        for conv in self.convs:
            x = conv(x)
        return x


def _describe(*convs, shape, dtype=torch.float32):
    model = _Chain(*convs).to(dtype)
    return describe(model, [torch.randn(*shape, dtype=dtype)])


def test_a_lone_convolution_is_a_conv_with_its_geometry():
    d = _describe(nn.Conv2d(4, 6, (3, 5), stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2),
                  shape=(2, 4, 11, 12))
    (c,) = d.convs
    assert d.regions == () and d.gemm is None and d.families == ("conv",)
    assert (c.dims, c.transposed, c.in_channels, c.out_channels, c.groups) == (2, False, 4, 6, 2)
    assert (c.kernel, c.stride, c.padding, c.dilation, c.output_padding) == ((3, 5), (2, 1), (1, 2), (1, 2), (0, 0))
    assert c.has_bias and c.dtype == "float32"
    assert c.in_shape == (2, 4, 11, 12) and c.out_shape == (2, 6, 6, 8)
    assert "self._conv0(x, self.get_submodule('convs.0').weight, self.get_submodule('convs.0').bias)" \
        in d.forward_src


def test_a_transposed_convolution_keeps_its_output_padding():
    d = _describe(nn.ConvTranspose3d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2, bias=False),
                  shape=(1, 4, 3, 4, 5))
    (c,) = d.convs
    assert c.transposed and c.dims == 3 and c.output_padding == (1, 1, 1) and not c.has_bias
    assert c.out_shape == (1, 6, 6, 8, 10)


def test_a_chain_of_convolutions_is_read_in_order():
    d = _describe(nn.Conv1d(4, 4, 3, groups=4), nn.Conv1d(4, 8, 1), nn.ConvTranspose1d(8, 2, 2, stride=2),
                  shape=(2, 4, 9))
    assert [(c.dims, c.transposed, c.groups) for c in d.convs] == [(1, False, 4), (1, False, 1), (1, True, 1)]
    assert [c.out_shape for c in d.convs] == [(2, 4, 7), (2, 8, 7), (2, 2, 14)]
    assert d.forward_src.count("x = self._conv") == 3


def test_named_modules_are_read_as_attributes():
    class Named(nn.Module):
        def __init__(self):
            super().__init__()
            self.depthwise = nn.Conv2d(3, 3, 3, groups=3)

        def forward(self, image):
            return self.depthwise(image)

    d = describe(Named(), [torch.randn(1, 3, 8, 8)])
    assert "image = self._conv0(image, self.depthwise.weight, self.depthwise.bias)" in d.forward_src


@pytest.mark.filterwarnings("ignore:Using padding='same'")
def test_same_padding_is_resolved_where_both_sides_pad_alike():
    (c,) = _describe(nn.Conv2d(2, 2, (3, 5), padding="same"), shape=(1, 2, 8, 8)).convs
    assert c.padding == (1, 2)
    (c,) = _describe(nn.Conv2d(2, 2, 3, padding="valid"), shape=(1, 2, 8, 8)).convs
    assert c.padding == (0, 0)
    with pytest.raises(NotCovered, match="same"):
        _describe(nn.Conv2d(2, 2, (3, 4), padding="same"), shape=(1, 2, 8, 8))


def test_half_convolutions_are_convs_of_their_dtype():
    (c,) = _describe(nn.Conv2d(2, 2, 3), shape=(1, 2, 8, 8), dtype=torch.float16).convs
    assert c.dtype == "float16"
    assert _describe(nn.Conv2d(2, 2, 3), shape=(1, 2, 8, 8), dtype=torch.float16).half_dtypes == ("float16",)


@pytest.mark.parametrize("conv,shape,why", [
    (nn.Conv2d(2, 2, 3, padding=1, padding_mode="reflect"), (1, 2, 8, 8), "zeros only"),
    (nn.Conv2d(2, 2, 3), (2, 8, 8), "batched"),
])
def test_unsupported_convolutions_say_why(conv, shape, why):
    with pytest.raises(NotCovered, match=why):
        _describe(conv, shape=shape)


@pytest.mark.parametrize("forward", [
    "return torch.relu(self.conv(x))",
    "return self.conv(x * 2.0)",
    "return self.conv(x) + self.conv(x)",
    "y = self.conv(x)\nreturn self.conv(y) + y",
])
def test_anything_more_than_a_chain_of_convolutions_is_no_conv(tmp_path, forward):
    from tests.templates.helpers import make_task
    task = make_task(tmp_path, "more", forward=forward, init="self.conv = nn.Conv2d(3, 3, 3, padding=1)",
                     inputs="[torch.randn(1, 3, 8, 8)]", sig="x")
    try:
        d = describe_task(task)
    except NotCovered:
        return
    assert d.convs == ()


def test_tunable_defaults_fit_the_output_channels_per_group():
    depthwise = _describe(nn.Conv2d(8, 8, 3, groups=8), shape=(1, 8, 8, 8)).convs
    tun = conv_tunable(depthwise)
    assert tun["BLOCK_N"][0] == 16 and tun["BLOCK_K"][0] == 16
    wide = _describe(nn.Conv2d(64, 128, 3), shape=(1, 64, 8, 8)).convs
    tun = conv_tunable(wide)
    assert tun["BLOCK_N"][0] == 128 and tun["BLOCK_K"][0] == 32
    assert all(len(set(v)) == len(v) for v in tun.values())


def test_a_strided_transposed_convolution_runs_all_phases_with_one_pipeline_stage_and_narrow_tiles_first_shorter_in_3d():
    strided = _describe(nn.ConvTranspose2d(32, 64, 3, stride=5, padding=1, dilation=2), shape=(1, 32, 6, 7)).convs
    tun = conv_tunable(strided)
    assert tun["ALL_PHASES"] == [1, 0] and tun["num_stages"] == [1, 3, 2, 4]
    assert tun["BLOCK_N"] == [32, 64, 128, 16]  # then the width that fits the 64 channels
    assert tun["num_warps"] == [4, 8, 2] and tun["BLOCK_M"][0] == 256
    in_3d = conv_tunable(_describe(nn.ConvTranspose3d(32, 32, (3, 5, 7), stride=2, groups=4),
                                   shape=(1, 32, 3, 4, 5)).convs)
    assert in_3d["BLOCK_M"] == [128, 256, 64, 32] and in_3d["num_warps"][0] == 4 and in_3d["ALL_PHASES"][0] == 1
    few = conv_tunable(_describe(nn.ConvTranspose2d(8, 8, 3, stride=2), shape=(1, 8, 6, 7)).convs)
    assert few["BLOCK_N"][0] == 16  # already narrower than 32
    plain = conv_tunable(_describe(nn.ConvTranspose2d(64, 64, 3), shape=(1, 64, 6, 7)).convs)
    assert "ALL_PHASES" not in plain and plain["num_stages"] == [3, 2, 4] and plain["BLOCK_N"][0] == 64
    assert plain["num_warps"][0] == 8
    plain_3d = conv_tunable(_describe(nn.ConvTranspose3d(8, 8, 3), shape=(1, 8, 3, 4, 5)).convs)
    assert plain_3d["BLOCK_M"][0] == 256 and "ALL_PHASES" not in plain_3d


def test_taps_is_on_first_where_every_convolution_it_changes_is_transposed():
    transposed = conv_tunable(_describe(nn.ConvTranspose2d(64, 32, 3), shape=(1, 64, 6, 7)).convs)
    assert transposed["TAPS"] == [1, 0]
    standard = conv_tunable(_describe(nn.Conv2d(64, 32, 3), shape=(1, 64, 6, 7)).convs)
    assert standard["TAPS"] == [0, 1]
    both = conv_tunable(_describe(nn.ConvTranspose2d(64, 32, 3), nn.Conv2d(32, 32, 3), shape=(1, 64, 6, 7)).convs)
    assert both["TAPS"] == [0, 1]
    # a strided transposed convolution is not changed by TAPS: no switch, whatever its channels
    assert "TAPS" not in conv_tunable(_describe(nn.ConvTranspose2d(64, 32, 3, stride=2), shape=(1, 64, 6, 7)).convs)


def test_the_c_backend_takes_a_standard_convolution_and_says_it_has_no_transposed_one():
    assert why_not_c(_describe(nn.Conv2d(2, 2, 3), shape=(1, 2, 8, 8))) is None
    d = _describe(nn.ConvTranspose2d(2, 2, 3), shape=(1, 2, 8, 8))
    assert "no transposed-convolution kernel" in why_not_c(d)


# KernelBench level 1, problems 50-87: (spatial dims, transposed, depthwise) of each
# convolution of the chain; all covered by the convolution template
LEVEL1 = {
    "50_conv_standard_2D__square_input__square_kernel.py": [(2, False, False)],
    "54_conv_standard_3D__square_input__square_kernel.py": [(3, False, False)],
    "55_conv_standard_2D__asymmetric_input__square_kernel.py": [(2, False, False)],
    "56_conv_standard_2D__asymmetric_input__asymmetric_kernel.py": [(2, False, False)],
    "57_conv_transposed_2D__square_input__square_kernel.py": [(2, True, False)],
    "59_conv_standard_3D__asymmetric_input__square_kernel.py": [(3, False, False)],
    "60_conv_standard_3D__square_input__asymmetric_kernel.py": [(3, False, False)],
    "61_conv_transposed_3D__square_input__square_kernel.py": [(3, True, False)],
    "62_conv_standard_2D__square_input__asymmetric_kernel.py": [(2, False, False)],
    "64_conv_transposed_1D.py": [(1, True, False)],
    "65_conv_transposed_2D__square_input__asymmetric_kernel.py": [(2, True, False)],
    "66_conv_standard_3D__asymmetric_input__asymmetric_kernel.py": [(3, False, False)],
    "67_conv_standard_1D.py": [(1, False, False)],
    "69_conv_transposed_2D__asymmetric_input__asymmetric_kernel.py": [(2, True, False)],
    "70_conv_transposed_3D__asymmetric_input__square_kernel.py": [(3, True, False)],
    "71_conv_transposed_2D__asymmetric_input__square_kernel.py": [(2, True, False)],
    "72_conv_transposed_3D_asymmetric_input_asymmetric_kernel___strided_padded_grouped_.py": [(3, True, False)],
    "74_conv_transposed_1D_dilated.py": [(1, True, False)],
    "75_conv_transposed_2D_asymmetric_input_asymmetric_kernel_strided__grouped____padded____dilated__.py":
        [(2, True, False)],
    "76_conv_standard_1D_dilated_strided__.py": [(1, False, False)],
    "77_conv_transposed_3D_square_input_square_kernel___padded____dilated____strided__.py": [(3, True, False)],
    "79_conv_transposed_1D_asymmetric_input_square_kernel___padded____strided____dilated__.py": [(1, True, False)],
    "80_conv_standard_2D_square_input_asymmetric_kernel___dilated____padded__.py": [(2, False, False)],
    "81_conv_transposed_2D_asymmetric_input_square_kernel___dilated____padded____strided__.py": [(2, True, False)],
    "82_conv_depthwise_2D_square_input_square_kernel.py": [(2, False, True)],
    "84_conv_depthwise_2D_asymmetric_input_square_kernel.py": [(2, False, True)],
    "85_conv_depthwise_2D_asymmetric_input_asymmetric_kernel.py": [(2, False, True)],
    "86_conv_depthwise_separable_2D.py": [(2, False, True), (2, False, False)],
    "87_conv_pointwise_2D.py": [(2, False, False)],
}


@pytest.mark.parametrize("name,chain", sorted(LEVEL1.items()))
def test_kernelbench_level1_conv_problems(name, chain):
    task = published_problem(KERNELBENCH / "level1" / name)
    assert coverage(task) is None
    d = describe_task(task)
    assert d.regions == () and d.families == ("conv",)
    assert [(c.dims, c.transposed, c.groups > 1 and c.groups == c.in_channels) for c in d.convs] == chain
    assert variants(task, "triton") == ("fused",)


def test_the_shipped_config_proposes_the_conv_template_on_triton_and_c_and_mutates_its_params(tmp_path):
    import yaml
    from tests.templates.helpers import make_task

    from foundry.templates import TemplateConfig, TemplateProposer
    from foundry.types import ProposalRequest
    shipped = yaml.safe_load((ROOT / "conf" / "templates" / "default.yaml").read_text())
    assert "conv" in shipped["families"]
    task = make_task(tmp_path, "conv", forward="return self.conv(x)", sig="x",
                     init="self.conv = nn.Conv2d(3, 8, 3, padding=1)", inputs="[torch.randn(2, 3, 16, 16)]")
    for config in (TemplateConfig(), TemplateConfig.from_config(shipped)):
        first = TemplateProposer(config=config).propose_sync(
            ProposalRequest(task=task, backend="triton", mode="translate"))
        assert first.source and first.origin == "template", first.note
        assert "_conv[grid]" in first.source and "F.conv" not in first.source.split("class ModelNew")[1]
    c = TemplateProposer().propose_sync(ProposalRequest(task=task, backend="c", mode="translate"))
    assert c.source and "foundry_conv" in c.source and "F.conv" not in c.source.split("class ModelNew")[1]
    off = TemplateProposer(config=TemplateConfig(families=("pointwise", "matmul"))).propose_sync(
        ProposalRequest(task=task, backend="triton", mode="translate"))
    assert not off.source and "conv" in off.note
    child = TemplateProposer().propose_sync(
        ProposalRequest(task=task, backend="triton", mode="optimize", parent=first, generation=1))
    assert child.source and child.note.startswith("params: ") and child.params
