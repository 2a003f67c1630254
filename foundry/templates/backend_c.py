"""Emit a `c` backend candidate from a Description."""

from __future__ import annotations

from foundry.templates.candidate import assemble, kernel_args, launcher_class, launcher_init
from foundry.templates.emit_c import TUNABLE_C, c_source
from foundry.templates.fxutil import NotCovered
from foundry.templates.ir import Description

HEADER = '''import torch
import torch.nn as nn
import torch.nn.functional as F
from foundry.kernels import c'''

FILL = '''

def _fill(src, params):
    simd = int(params["SIMD"])
    return (src.replace("@BLOCK@", str(int(params["BLOCK"])))
               .replace("@IBLOCK@", str(int(params["IBLOCK"])))
               .replace("@SIMD@", "simdlen(%d)" % simd if simd else "")
               .replace("@SCHED@", str(params["SCHED"])))
'''


def tunable_for(desc: Description) -> dict:
    """The C parameter space that matters for this description: BLOCK and SIMD shape only
    pointwise regions, IBLOCK only row ops over a non-last dim; a setting that changes no
    kernel gets its first value alone, so the tuner's screen times no two identical
    kernels."""
    pointwise = any(r.row is None for r in desc.regions)
    tun = {name: list(TUNABLE_C[name]) if pointwise else [TUNABLE_C[name][0]] for name in ("BLOCK", "SIMD")}
    tun["SCHED"] = list(TUNABLE_C["SCHED"])
    if any(r.row is not None and r.row.family in ("reduce", "scan", "softmax") for r in desc.regions):
        tun["IBLOCK"] = list(TUNABLE_C["IBLOCK"])
    else:
        tun["IBLOCK"] = [TUNABLE_C["IBLOCK"][0]]
    return tun


def why_not_c(desc: Description) -> str | None:
    """Why the c templates do not take `desc` (None when they do): they compute float32
    tasks only, and have no matrix-product or convolution kernel."""
    if desc.gemm is not None:
        return "the c templates have no matrix-product kernel; the triton template takes it"
    if desc.convs:
        return "the c templates have no convolution kernel; the triton template takes it"
    if desc.half_dtypes:
        return (f"the c templates compute float32 tasks only, this one reads or writes "
                f"{', '.join(desc.half_dtypes)}; the triton templates take it")
    return None


def emit_c_candidate(*, desc: Description, task_source: str, params: dict | None = None,
                     tunable: dict | None = None) -> str:
    why = why_not_c(desc)
    if why:
        raise NotCovered(why)
    tun = tunable or tunable_for(desc)
    defaults = {k: v[0] for k, v in tun.items()}
    defaults.update(params or {})
    src = c_source(desc.regions)
    kernel_defs = f"_C_SRC = r'''{src}'''\n{FILL}"
    launchers = [launcher_class(r, [f"self.kernel.{r.name}({', '.join(kernel_args(r))})"], packed_ints=True)
                 for r in desc.regions]
    init = ["lib = c.build(_fill(_C_SRC, params), flags=('-fno-math-errno',))"]
    init += [launcher_init(r, "lib") for r in desc.regions]
    fams = ", ".join(desc.families)
    note = (f"Template candidate (c backend): fused regions [{fams}] run as OpenMP/SIMD C kernels; "
            "torch keeps the rest.")
    return assemble(desc=desc, task_source=task_source, backend="c", header=HEADER,
                    kernel_defs=kernel_defs, launchers=launchers, init_lines=init,
                    tunable=tun, params=defaults, note=note)
