"""Template "conv": the fused template (each region a Triton kernel) with every
convolution module that the forward calls before its regions run by the Triton
convolution kernels of `conv_triton` (implicit GEMM; a direct kernel for a depthwise one;
all output phases in one launch, each with only its taps, for a transposed one) on the
module's own weight and bias, instead of the library's. Their tile parameters are the
CONV_* ones, beside the regions' BLOCK / num_warps / SPLIT; float32 products share the
candidate's F32_DOT."""

from __future__ import annotations

from foundry.templates.conv_calls import with_conv_calls
from foundry.templates.conv_triton import conv_init_line, conv_tunable
from foundry.templates.ir import Description

PREFIX = "CONV_"


def conv_prologue_tunable(desc: Description) -> dict:
    """The convolution kernels' tunable space for `desc.prologue_convs`, CONV_-prefixed."""
    tun = conv_tunable(desc.prologue_convs)
    return {(name if name == "F32_DOT" else PREFIX + name): list(values) for name, values in tun.items()}


def swap_convs(desc: Description) -> tuple[Description, list[str]]:
    """`desc` with its forward calling `self._conv<i>(x, weight, bias)` for each
    convolution module, and the constructor lines that build those."""
    init = [conv_init_line(i, conv, PREFIX) for i, conv in enumerate(desc.prologue_convs)]
    return with_conv_calls(desc), init
