"""The forward of a template that runs the nn.Linear modules by its own kernels: each call
`self.<name>(x)` of a float32 forward's Linear becomes `self._lin<i>(x)`, whatever
backend's kernel `self._lin<i>` is (the Triton matmul of linear_triton, the C kernel of
linear_c)."""

from __future__ import annotations

import dataclasses
import re
from typing import Callable

from foundry.templates.ir import Description


def linear_targets(desc: Description) -> tuple:
    """The nn.Linear attributes that a float32 forward calls as `self.<name>(...)`; the
    "linear" templates apply where there is at least one (and every Linear is such)."""
    if desc.half_dtypes:
        return ()
    names = tuple(dict.fromkeys(p.target for p in desc.prologues if p.kind == "linear"))
    if any(not name.isidentifier() or f"self.{name}(" not in desc.forward_src for name in names):
        return ()
    return names


def swap_linears(desc: Description, init_line: Callable[[int, str], str]) -> tuple[Description, list[str]]:
    """`desc` with its forward calling `self._lin<i>(...)` for each Linear, and the
    constructor lines that build those (`init_line(i, name)`)."""
    forward, init = desc.forward_src, []
    for i, name in enumerate(linear_targets(desc)):
        forward = re.sub(rf"\bself\.{re.escape(name)}\(", f"self._lin{i}(", forward)
        init.append(init_line(i, name))
    return dataclasses.replace(desc, forward_src=forward), init
