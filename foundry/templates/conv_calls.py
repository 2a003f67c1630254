"""The forward of a template that runs the convolution modules by its own kernels: each
call of a prologue convolution module `self.conv(x)` becomes `self._conv<i>(x,
self.conv.weight, self.conv.bias)`, whatever backend's kernel `self._conv<i>` is."""

from __future__ import annotations

import dataclasses
import re

from foundry.templates.ir import Description


def with_conv_calls(desc: Description) -> Description:
    """`desc` with its forward calling `self._conv<i>` for each of `desc.prologue_convs`."""
    forward = desc.forward_src
    for i, conv in enumerate(desc.prologue_convs):
        call = re.compile(rf"\b{re.escape(conv.module)}\(([^()]*)\)")
        forward = call.sub(lambda m, i=i, e=conv.module: f"self._conv{i}({m.group(1)}, {e}.weight, {e}.bias)",
                           forward)
    return dataclasses.replace(desc, forward_src=forward)
