"""The Triton convolution template through Triton's interpreter on the CPU, at small
sizes, against torch in float32: 1-, 2- and 3-D convolutions with strides, padding,
dilation, asymmetric kernels, groups, depthwise, with and without bias; transposed ones
with output padding too; a chain (depthwise then pointwise); sums longer than one
BLOCK_K step and sizes that are no multiple of the blocks; KernelBench's level-1
convolution problems at small sizes with the default parameters the template picks."""

import os

os.environ["TRITON_INTERPRET"] = "1"

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

pytest.importorskip("triton")

from tests.templates.product_cases import CONV_BLOCKS as BLOCKS  # noqa: E402
from tests.templates.product_cases import CONV_CASES as CASES  # noqa: E402
from tests.templates.product_cases import TAPS_CASES  # noqa: E402
from tests.templates.helpers import assert_close, make_task, run_candidate, small_problem  # noqa: E402

from foundry.templates.engine import coverage, emit, reference_and_inputs  # noqa: E402
from foundry.tuning.inprocess import load_candidate  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
KERNELBENCH = ROOT.parent / "shared" / "kernelbench"
TOL = {"atol": 1e-4, "rtol": 1e-4}


@pytest.mark.parametrize("name,module,x", CASES, ids=[c[0] for c in CASES])
def test_convolution_matches_torch(tmp_path, name, module, x):
    task = make_task(tmp_path, name, forward="return self.conv(x)", init=f"self.conv = {module}",
                     inputs=f"[{x}]", sig="x")
    assert coverage(task) is None
    ref, got = run_candidate(task, backend="triton", params=BLOCKS)
    assert_close(ref, got, **TOL)


TRANSPOSED_STRIDED = [c for c in CASES if c[0].startswith("transposed") and "stride=" in c[1]]


@pytest.mark.parametrize("name,module,x", TRANSPOSED_STRIDED, ids=[c[0] for c in TRANSPOSED_STRIDED])
def test_strided_transposed_convolution_one_phase_per_program_matches_torch(tmp_path, name, module, x):
    # ALL_PHASES off: a program computes one output phase, its outputs a stride apart
    task = make_task(tmp_path, name, forward="return self.conv(x)", init=f"self.conv = {module}",
                     inputs=f"[{x}]", sig="x")
    ref, got = run_candidate(task, backend="triton", params={**BLOCKS, "ALL_PHASES": 0})
    assert_close(ref, got, **TOL)


def test_depthwise_separable_chain_matches_torch(tmp_path):
    init = ("self.depthwise = nn.Conv2d(4, 4, 3, padding=1, groups=4, bias=False)\n"
            "self.pointwise = nn.Conv2d(4, 7, 1, bias=False)")
    task = make_task(tmp_path, "separable", forward="x = self.depthwise(x)\nreturn self.pointwise(x)", init=init,
                     inputs="[torch.randn(2, 4, 6, 5)]", sig="x")
    ref, got = run_candidate(task, backend="triton", params=BLOCKS)
    assert_close(ref, got, **TOL)


def test_the_candidate_reads_the_module_parameters_and_calls_no_torch_convolution(tmp_path):
    task = make_task(tmp_path, "own", forward="return self.conv(x)", init="self.conv = nn.Conv2d(3, 4, 3)",
                     inputs="[torch.randn(1, 3, 6, 6)]", sig="x")
    src = emit(task, backend="triton")
    forward = src.split("class ModelNew")[1]
    assert "conv2d" not in forward and "F." not in forward
    model, init, inputs = reference_and_inputs(task, seed=7)
    new = load_candidate(src, BLOCKS).ModelNew(*init)
    with torch.no_grad():
        new.conv.weight.mul_(-2.0)  # the candidate computes with whatever weight the module holds
        model.load_state_dict(new.state_dict())
        assert_close(model(*inputs), new(*inputs), **TOL)


def test_half_convolution_accumulates_in_float32(tmp_path):
    # float16 only: the interpreter's tl.dot multiplies bfloat16 tiles as raw bits
    task = make_task(tmp_path, "fp16", forward="return self.conv(x)", init="self.conv = nn.Conv2d(6, 5, 3).half()",
                     inputs="[torch.randn(1, 6, 7, 7).half()]", sig="x")
    model, init, inputs = reference_and_inputs(task, seed=7)
    new = load_candidate(emit(task, backend="triton"), BLOCKS).ModelNew(*init)
    new.load_state_dict(model.state_dict())
    with torch.no_grad():
        got = new(*inputs)
        want = torch.nn.functional.conv2d(inputs[0].float(), model.conv.weight.float(), model.conv.bias.float())
    assert got.dtype == torch.float16
    torch.testing.assert_close(got.float(), want.half().float(), atol=1e-2, rtol=1e-3)


# (problem file, size constants small enough for the interpreter); the template's own
# default parameters
PROBLEMS = [
    ("60_conv_standard_3D__square_input__asymmetric_kernel.py",
     {"batch_size": 1, "out_channels": 8, "width": 7, "height": 8, "depth": 9}),
    ("67_conv_standard_1D.py", {"batch_size": 2, "in_channels": 4, "out_channels": 8, "length": 40}),
    ("72_conv_transposed_3D_asymmetric_input_asymmetric_kernel___strided_padded_grouped_.py",
     {"batch_size": 1, "in_channels": 8, "out_channels": 8, "depth": 2, "height": 3, "width": 4}),
    ("75_conv_transposed_2D_asymmetric_input_asymmetric_kernel_strided__grouped____padded____dilated__.py",
     {"batch_size": 1, "in_channels": 8, "out_channels": 8, "height": 5, "width": 6}),
    ("76_conv_standard_1D_dilated_strided__.py", {"batch_size": 2, "in_channels": 4, "out_channels": 8, "length": 50}),
    ("77_conv_transposed_3D_square_input_square_kernel___padded____dilated____strided__.py",
     {"batch_size": 1, "in_channels": 4, "out_channels": 4, "depth": 3, "height": 4, "width": 4}),
    ("79_conv_transposed_1D_asymmetric_input_square_kernel___padded____strided____dilated__.py",
     {"batch_size": 2, "in_channels": 4, "out_channels": 8, "length": 30}),
    ("80_conv_standard_2D_square_input_asymmetric_kernel___dilated____padded__.py",
     {"batch_size": 1, "in_channels": 4, "out_channels": 8, "width": 20, "height": 16}),
    ("81_conv_transposed_2D_asymmetric_input_square_kernel___dilated____padded____strided__.py",
     {"batch_size": 1, "in_channels": 4, "out_channels": 8, "height_in": 4, "width_in": 6}),
    ("85_conv_depthwise_2D_asymmetric_input_asymmetric_kernel.py",
     {"batch_size": 1, "in_channels": 4, "out_channels": 4, "groups": 4, "height": 10, "width": 16}),
    ("86_conv_depthwise_separable_2D.py",
     {"batch_size": 1, "in_channels": 4, "out_channels": 8, "height": 10, "width": 12}),
    ("87_conv_pointwise_2D.py", {"batch_size": 1, "in_channels": 8, "out_channels": 12, "height": 10, "width": 12}),
]


@pytest.mark.parametrize("problem,sizes", PROBLEMS, ids=[p.split("_conv")[0] for p, _ in PROBLEMS])
def test_kernelbench_conv_problem_matches_with_default_params(tmp_path, problem, sizes):
    task = small_problem(tmp_path, KERNELBENCH / "level1" / problem, sizes)
    assert coverage(task) is None
    ref, got = run_candidate(task, backend="triton")
    assert_close(ref, got, **TOL)


def _switch_on_matches_torch(tmp_path, name, module, x, *, switch: str, params: dict, others: tuple):
    """The convolution's candidate offers `switch` (on or off first); with it on, it
    matches torch, and none of the kernels `others` (the ones the switch replaces) is
    launched."""
    task = make_task(tmp_path, name, forward="return self.conv(x)", init=f"self.conv = {module}",
                     inputs=f"[{x}]", sig="x")
    source = emit(task, backend="triton")
    assert f"'{switch}': [0, 1]" in source or f"'{switch}': [1, 0]" in source
    model, init, inputs = reference_and_inputs(task, seed=7)
    mod = load_candidate(source, {**BLOCKS, **params, switch: 1})

    def other_kernel(*args, **kwargs):
        raise AssertionError(f"{switch} on: its own kernel should have run")
    for kernel in others:
        setattr(mod, kernel, other_kernel)
    torch.manual_seed(7)
    new = mod.ModelNew(*init)
    with torch.no_grad():
        assert_close(model(*inputs), new(*inputs), **TOL)


@pytest.mark.parametrize("name,module,x", TAPS_CASES, ids=[c[0] for c in TAPS_CASES])
def test_taps_outermost_matches_torch(tmp_path, name, module, x):
    # CHANNELS_LAST off: the operands as given (on: the next test)
    _switch_on_matches_torch(tmp_path, name, module, x, switch="TAPS", params={"BLOCK_K": 16, "CHANNELS_LAST": 0},
                             others=("_conv", "_conv_transposed", "_conv_transposed_rows"))


@pytest.mark.parametrize("name,module,x", TAPS_CASES, ids=[c[0] for c in TAPS_CASES])
def test_taps_on_channels_last_operands_match_torch(tmp_path, name, module, x):
    # CHANNELS_LAST with TAPS: the input copied channels-last by the tile copy (launched
    # once per forward), the weight input-channels-contiguous; the implicit-GEMM kernels
    # stay unlaunched
    task = make_task(tmp_path, name, forward="return self.conv(x)", init=f"self.conv = {module}",
                     inputs=f"[{x}]", sig="x")
    model, init, inputs = reference_and_inputs(task, seed=7)
    mod = load_candidate(emit(task, backend="triton"), {**BLOCKS, "BLOCK_K": 16, "TAPS": 1, "CHANNELS_LAST": 1})
    copies = []

    class CountedCopy:
        def __getitem__(self, grid):
            copies.append(grid)
            return COPY[grid]
    COPY = mod._copy_tiles
    mod._copy_tiles = CountedCopy()
    for kernel in ("_conv", "_conv_transposed", "_conv_transposed_rows"):
        setattr(mod, kernel, None)  # launching one would raise
    torch.manual_seed(7)
    new = mod.ModelNew(*init)
    with torch.no_grad():
        assert_close(model(*inputs), new(*inputs), **TOL)
    assert len(copies) == 1


def test_channels_last_is_on_first_for_float32_only(tmp_path):
    def source(dtype):
        task = make_task(tmp_path, f"cl_{dtype}", forward="return self.conv(x)",
                         init=f"self.conv = nn.ConvTranspose2d(16, 8, 3).to(torch.{dtype})",
                         inputs=f"[torch.randn(1, 16, 5, 5).to(torch.{dtype})]", sig="x")
        return emit(task, backend="triton")
    assert "'CHANNELS_LAST': [1, 0]" in source("float32")
    assert "'CHANNELS_LAST': [0, 1]" in source("float16")


def test_taps_is_offered_only_where_it_changes_the_kernel(tmp_path):
    few = make_task(tmp_path, "few_channels", forward="return self.conv(x)", init="self.conv = nn.Conv2d(3, 8, 3)",
                    inputs="[torch.randn(1, 3, 6, 6)]", sig="x")
    strided = make_task(tmp_path, "strided_transposed", forward="return self.conv(x)",
                        init="self.conv = nn.ConvTranspose2d(16, 8, 3, stride=2)", inputs="[torch.randn(1, 16, 5, 5)]",
                        sig="x")
    for task in (few, strided):
        source = emit(task, backend="triton")
        assert "'TAPS'" not in source and "'CHANNELS_LAST'" not in source
        # stale settings: ignored
        ref, got = run_candidate(task, backend="triton", params={**BLOCKS, "TAPS": 1, "CHANNELS_LAST": 1})
        assert_close(ref, got, **TOL)


# OUTER on: 2 to 15 input channels per group, the sum as outer products per tap and channel;
# standard convolutions (strided, padded, dilated, grouped, 1-3-D) and stride-1 transposed ones
OUTER_CASES = [
    ("conv1d", "nn.Conv1d(3, 5, 4, stride=2, padding=2, dilation=2)", "torch.randn(2, 3, 19)"),
    ("conv2d_first_layer", "nn.Conv2d(3, 20, (5, 3), stride=(2, 3), padding=(2, 1))", "torch.randn(2, 3, 13, 11)"),
    ("conv2d_groups", "nn.Conv2d(8, 6, 3, padding=1, groups=2, bias=False)", "torch.randn(1, 8, 6, 7)"),
    ("conv3d_asymmetric", "nn.Conv3d(3, 17, (3, 3, 1), bias=False)", "torch.randn(2, 3, 6, 7, 4)"),
    ("transposed2d", "nn.ConvTranspose2d(4, 6, (3, 2), padding=(1, 0), dilation=(1, 2))", "torch.randn(2, 4, 5, 6)"),
]


@pytest.mark.parametrize("name,module,x", OUTER_CASES, ids=[c[0] for c in OUTER_CASES])
def test_outer_products_match_torch(tmp_path, name, module, x):
    _switch_on_matches_torch(tmp_path, name, module, x, switch="OUTER", params={},
                             others=("_conv", "_conv_taps", "_conv_transposed", "_conv_transposed_rows"))


def test_outer_is_offered_first_and_only_where_it_changes_the_kernel(tmp_path):
    few = make_task(tmp_path, "few_channels", forward="return self.conv(x)", init="self.conv = nn.Conv2d(3, 8, 3)",
                    inputs="[torch.randn(1, 3, 6, 6)]", sig="x")
    assert "'OUTER': [1, 0]" in emit(few, backend="triton")  # an RGB first layer: on first
    eight = make_task(tmp_path, "eight_channels", forward="return self.conv(x)", init="self.conv = nn.Conv2d(8, 8, 3)",
                      inputs="[torch.randn(1, 8, 6, 6)]", sig="x")
    assert "'OUTER': [0, 1]" in emit(eight, backend="triton")  # offered, off first
    many = make_task(tmp_path, "many_channels", forward="return self.conv(x)", init="self.conv = nn.Conv2d(16, 8, 3)",
                     inputs="[torch.randn(1, 16, 6, 6)]", sig="x")
    strided = make_task(tmp_path, "strided_transposed", forward="return self.conv(x)",
                        init="self.conv = nn.ConvTranspose2d(3, 8, 3, stride=2)", inputs="[torch.randn(1, 3, 5, 5)]",
                        sig="x")
    depthwise = make_task(tmp_path, "depthwise", forward="return self.conv(x)",
                          init="self.conv = nn.Conv2d(4, 8, 3, groups=4)", inputs="[torch.randn(1, 4, 6, 6)]", sig="x")
    for task in (many, strided, depthwise):
        assert "'OUTER'" not in emit(task, backend="triton")
        ref, got = run_candidate(task, backend="triton", params={**BLOCKS, "OUTER": 1})  # a stale setting: ignored
        assert_close(ref, got, **TOL)


# DW_TILE on: one input channel per group, a 2-D tile of an output plane per program
DEPTHWISE = [c for c in CASES if eval(c[1], {"nn": torch.nn}).in_channels // eval(c[1], {"nn": torch.nn}).groups == 1] + [
    ("conv1d_depthwise", "nn.Conv1d(4, 8, 5, stride=2, padding=3, dilation=2, groups=4)", "torch.randn(2, 4, 150)"),
    ("conv3d_depthwise", "nn.Conv3d(3, 3, (2, 3, 3), stride=(2, 1, 2), padding=1, groups=3)", "torch.randn(1, 3, 5, 6, 7)"),
    ("transposed3d_depthwise", "nn.ConvTranspose3d(2, 2, 3, stride=(2, 1, 2), padding=1, output_padding=(1, 0, 1), "
     "dilation=(1, 2, 1), groups=2)", "torch.randn(1, 2, 3, 4, 5)"),
]


@pytest.mark.parametrize("name,module,x", DEPTHWISE, ids=[c[0] for c in DEPTHWISE])
def test_depthwise_by_tiles_matches_torch(tmp_path, name, module, x):
    _switch_on_matches_torch(tmp_path, name, module, x, switch="DW_TILE", params={}, others=("_conv_depthwise",))
