"""Emit a `c` backend candidate from a Description."""

from __future__ import annotations

from foundry.templates.candidate import assemble, kernel_args, launcher_class, launcher_init
from foundry.templates.conv_c import (CONV_C_LAUNCHER, CONV_C_SRC, conv_c_init_line, conv_c_tunable,
                                      why_not_c_convs)
from foundry.templates.conv_calls import with_conv_calls
from foundry.templates.emit_c import C_MATH, TUNABLE_C, c_source
from foundry.templates.fxutil import NotCovered
from foundry.templates.ir import Description
from foundry.templates.linear_c import LINEAR_C_LAUNCHER, LINEAR_C_SRC, TUNABLE_LINEAR_C, linear_c_init_line
from foundry.templates.linear_calls import linear_targets, swap_linears

HEADER = '''import torch
import torch.nn as nn
import torch.nn.functional as F
from foundry.kernels import c'''

FILL = '''

def _fill(src, params):
    simd = int(params.get("SIMD", 0))
    return (src.replace("@BLOCK@", str(int(params.get("BLOCK", 4096))))
               .replace("@IBLOCK@", str(int(params.get("IBLOCK", 256))))
               .replace("@SIMD@", "simdlen(%d)" % simd if simd else "")
               .replace("@SCHED@", str(params.get("SCHED", "static")))
               .replace("@CONV_OCB@", str(int(params.get("CONV_OCB", 8))))
               .replace("@CONV_OWT@", str(int(params.get("CONV_OWT", 64))))
               .replace("@LIN_NR@", str(int(params.get("LIN_NR", 8))))
               .replace("@LIN_MR@", str(int(params.get("LIN_MR", 2)))))
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
    tasks only, have no general matrix-product kernel (for a lone product, or products
    whose regions only pass values on, as a Linear and a dropout that drops nothing; where
    those products are nn.Linear modules, the `linear` template takes them), and no
    transposed-convolution one."""
    if desc.products_only and not _linears(desc):
        return "the c templates have no matrix-product kernel; the triton template takes it"
    if desc.convs:
        why = why_not_c_convs(desc.convs)
        if why:
            return why
    if desc.half_dtypes:
        return (f"the c templates compute float32 tasks only, this one reads or writes "
                f"{', '.join(desc.half_dtypes)}; the triton templates take it")
    return None


def _linears(desc: Description) -> tuple:
    """The nn.Linear modules the C Linear kernel takes (every one the forward calls, in a
    forward whose products are all such modules), else ()."""
    if desc.gemm is not None or desc.convs or any(p.kind == "matmul" for p in desc.prologues):
        return ()
    return linear_targets(desc)


def variants_for(desc: Description) -> tuple:
    """The c templates for `desc`: `fused` (the regions as C kernels, the convolutions and
    Linear products left to the library); where the C convolution kernel takes every
    convolution the forward calls, `conv` (those convolutions run by it too); where the
    forward calls nn.Linear modules, `linear` (each run by the C Linear kernel,
    foundry.templates.linear_c). A forward of convolutions alone has `conv` only, one whose
    only work is Linear products `linear` only."""
    if desc.convs:
        return ("conv",)
    names = []
    if not desc.products_only:
        names.append("fused")
    if _linears(desc):
        names.append("linear")
    if desc.prologue_convs and why_not_c_convs(desc.prologue_convs) is None:
        names.append("conv")
    return tuple(names)


def _conv_tunable(desc: Description) -> dict:
    return conv_c_tunable(desc.convs or desc.prologue_convs)


def _regions_tunable(desc: Description) -> dict:
    """The regions' parameters; a forward whose regions only pass values on has them
    fixed (no setting changes its identity copies enough to be worth a screen point)."""
    tun = tunable_for(desc) if desc.regions else {}
    if desc.products_only:
        tun = {k: v[:1] for k, v in tun.items()}
    return tun


def emit_c_candidate(*, desc: Description, task_source: str, params: dict | None = None,
                     tunable: dict | None = None, variant: str = "fused") -> str:
    why = why_not_c(desc)
    if why:
        raise NotCovered(why)
    if variant not in variants_for(desc):
        raise ValueError(f"template {variant!r} does not apply (choose from {', '.join(variants_for(desc))})")
    convs, linears = variant == "conv", variant == "linear"
    tun = tunable or {**_regions_tunable(desc), **(_conv_tunable(desc) if convs else {}),
                      **({k: list(v) for k, v in TUNABLE_LINEAR_C.items()} if linears else {})}
    defaults = {k: v[0] for k, v in tun.items()}
    defaults.update(params or {})
    src = c_source(desc.regions) if desc.regions else C_MATH
    if convs:
        src += CONV_C_SRC
    if linears:
        src += LINEAR_C_SRC
    kernel_defs = f"_C_SRC = r'''{src}'''\n{FILL}"
    launchers = [launcher_class(r, [f"self.kernel.{r.name}({', '.join(kernel_args(r))})"], packed_ints=True)
                 for r in desc.regions]
    # -fno-trapping-math: no value changes, but the compiler may evaluate both arms of a
    # select (kf_tanh's small and large forms), which is what lets the elementwise loops
    # vectorize at all (with trapping math, GCC 12 leaves them scalar: "control flow in loop");
    # a multiply-add contracted into one FMA (C's ISO mode leaves them apart) in the convolution's sums
    flags = ("('-fno-math-errno', '-fno-trapping-math', '-ffp-contract=fast')" if convs or linears
             else "('-fno-math-errno', '-fno-trapping-math')")
    init = [f"lib = c.build(_fill(_C_SRC, params), flags={flags})"]
    init += [launcher_init(r, "lib") for r in desc.regions]
    fams = ", ".join(desc.families)
    note = (f"Template candidate (c backend): fused regions [{fams}] run as OpenMP/SIMD C kernels; "
            "torch keeps the rest.")
    if convs:
        chain = desc.convs
        if not desc.convs:
            chain, desc = desc.prologue_convs, with_conv_calls(desc)
        launchers.append(CONV_C_LAUNCHER)
        init += [conv_c_init_line(i, conv) for i, conv in enumerate(chain)]
        note = ("Template candidate (c backend): each convolution as a direct OpenMP/SIMD C convolution on the "
                "module's own weight and bias" + (f", fused regions [{fams}] as C kernels." if desc.regions else "."))
    if linears:
        desc, linear_init = swap_linears(desc, linear_c_init_line)
        launchers.append(LINEAR_C_LAUNCHER)
        init += linear_init
        note = note.replace("; torch keeps the rest.", ", each nn.Linear as a C kernel reading its weight once "
                                                          "per few rows; torch keeps the rest.")
    return assemble(desc=desc, task_source=task_source, backend="c", header=HEADER,
                    kernel_defs=kernel_defs, launchers=launchers, init_lines=init,
                    tunable=tun, params=defaults, note=note)
