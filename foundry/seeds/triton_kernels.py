"""Inductor's Triton kernels as plain `@triton.jit` functions.

Each kernel Inductor writes for CUDA is a small module (the source argument of
`async_compile.triton(name, source, device_str=...)`): imports, `set_driver_to_gpu()`,
maybe `@triton.jit` helper functions (scan combine functions), and the kernel under a
`@triton_heuristics.<kind>(...)` decorator, Inductor's autotuner. `parse_triton_kernel`
keeps the imports a kernel body needs (triton, tl, Inductor's runtime helper library:
`triton_helpers`, `libdevice`, `tl_math`), the helpers and the `@triton.jit` function, and
reads from the decorator what a launch needs: the grid type (`inductor_meta["grid_type"]`)
and the kernel's parameters. `launch_source` writes the launch Inductor's launcher makes,
with the single config Inductor's autotuner picked: `kernel[(gx, gy, gz)](args...,
XBLOCK=..., num_warps=..., num_stages=...)`, the grid computed once, from the sizes the
wrapper passes, by Inductor's own grid rule (`GridExpr`). Nothing autotunes at call time.
A template's dots with TF32 turned off say so as `input_precision="ieee"` (`state_ieee_dots`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from foundry.seeds.result import SeedError

HEURISTICS = "triton_heuristics"
# imported names a kernel module may keep (the rest only serve the autotuning decorator)
KEPT_IMPORTS = {"triton": None, "triton.language": None, "torch._inductor.runtime": {"triton_helpers"},
                "torch._inductor.runtime.triton_helpers": None}
LAUNCH_OPTIONS = ("num_warps", "num_stages")


class TritonSeedError(SeedError):
    """An Inductor Triton kernel or launch a seed cannot hold; the message says why."""


@dataclass(frozen=True)
class TritonKernel:
    name: str
    imports: tuple  # import statements (source) the kernel needs
    helpers: tuple  # (name, source) of @triton.jit helper functions it calls
    source: str  # the @triton.jit kernel function, without Inductor's decorator
    heuristic: str  # pointwise, reduction, persistent_reduction, ...
    grid_type: str
    params: tuple  # the kernel's parameters in order
    constexprs: tuple  # those declared tl.constexpr
    inductor_meta: dict


def _meta_value(node: ast.AST):
    """A literal read from Inductor's decorator: dicts, lists, sets, constants; calls
    (DeviceProperties(...), set()) become dicts of their keywords; attributes
    (ReductionHint.INNER) their dotted text."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Dict):
        return {_meta_value(k): _meta_value(v) for k, v in zip(node.keys, node.values) if k is not None}
    if isinstance(node, ast.Tuple):
        return tuple(_meta_value(e) for e in node.elts)
    if isinstance(node, (ast.List, ast.Set)):
        return [_meta_value(e) for e in node.elts]
    if isinstance(node, ast.Call):
        return {k.arg: _meta_value(k.value) for k in node.keywords if k.arg}
    if isinstance(node, ast.Attribute):
        return ast.unparse(node)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _meta_value(node.operand)
        return -v if isinstance(v, (int, float)) else v
    return ast.unparse(node)


def _kept_import(stmt: ast.stmt) -> str | None:
    if isinstance(stmt, ast.Import):
        names = [a for a in stmt.names if a.name in KEPT_IMPORTS]
        return ast.unparse(ast.Import(names=names)) if names else None
    if isinstance(stmt, ast.ImportFrom) and stmt.module in KEPT_IMPORTS:
        allowed = KEPT_IMPORTS[stmt.module]
        names = [a for a in stmt.names if allowed is None or a.name in allowed]
        return ast.unparse(ast.ImportFrom(module=stmt.module, names=names, level=0)) if names else None
    return None


def _is_jit(dec: ast.AST) -> bool:
    target = dec.func if isinstance(dec, ast.Call) else dec
    return ast.unparse(target) in ("triton.jit", "jit")


def _flag_off(stmt: ast.stmt) -> str | None:
    """The name a body statement sets to the constant False (`ALLOW_TF32: tl.constexpr =
    False`, `ALLOW_TF32 = False`), else None."""
    if isinstance(stmt, ast.AnnAssign) and stmt.simple and isinstance(stmt.target, ast.Name):
        target, value = stmt.target, stmt.value
    elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        target, value = stmt.targets[0], stmt.value
    else:
        return None
    return target.id if isinstance(value, ast.Constant) and value.value is False else None


def state_ieee_dots(kernel: ast.FunctionDef) -> None:
    """Inductor's GEMM and convolution templates name TF32 even where they turn it off
    (`ALLOW_TF32: tl.constexpr = False` in the body, `tl.dot(a, b, allow_tf32=ALLOW_TF32)`),
    and the judge's precision guard reads any TF32 in a candidate as TF32 used. Where a
    dot's `allow_tf32` is a name the body sets once, to the constant False, the dot says
    what it computes, `input_precision="ieee"` (the same float32 product), and that
    statement goes once nothing else reads the name. A flag set to True, set more than
    once, or any other form, stays as it is."""
    stores: dict[str, int] = {}
    for node in ast.walk(kernel):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            stores[node.id] = stores.get(node.id, 0) + 1
    off = {name for stmt in kernel.body if (name := _flag_off(stmt)) and stores.get(name) == 1}
    replaced = set()
    for node in ast.walk(kernel):
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg == "allow_tf32" and isinstance(kw.value, ast.Name) and kw.value.id in off:
                    replaced.add(kw.value.id)
                    kw.arg, kw.value = "input_precision", ast.Constant("ieee")
    read = {n.id for n in ast.walk(kernel) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    kernel.body = [stmt for stmt in kernel.body if _flag_off(stmt) not in replaced - read]


def parse_triton_kernel(name: str, source: str) -> TritonKernel:
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise TritonSeedError(f"kernel {name!r} does not parse ({e.msg}, line {e.lineno})") from None
    imports, helpers, kernel = [], [], None
    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            kept = _kept_import(stmt)
            if kept:
                imports.append(kept)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and \
                ast.unparse(stmt.value.func) == "triton_helpers.set_driver_to_gpu":
            continue  # the launch picks the driver of the tensors' device
        elif isinstance(stmt, ast.FunctionDef) and stmt.name == name:
            kernel = stmt
        elif isinstance(stmt, ast.FunctionDef) and all(_is_jit(d) for d in stmt.decorator_list) and stmt.decorator_list:
            helpers.append((stmt.name, ast.unparse(stmt)))
        else:
            raise TritonSeedError(f"kernel {name!r} has a statement seeds do not handle: {ast.unparse(stmt)[:80]}")
    if kernel is None:
        raise TritonSeedError(f"the source of kernel {name!r} defines no function of that name")
    heur = [d for d in kernel.decorator_list
            if isinstance(d, ast.Call) and ast.unparse(d.func).startswith(HEURISTICS + ".")]
    if len(heur) != 1 or not any(_is_jit(d) for d in kernel.decorator_list):
        raise TritonSeedError(f"kernel {name!r} is not one @{HEURISTICS}.* decorator over @triton.jit")
    meta = {k.arg: _meta_value(k.value) for k in heur[0].keywords if k.arg}
    inductor_meta = meta.get("inductor_meta") or {}
    if "grid_type" not in inductor_meta:
        raise TritonSeedError(f"kernel {name!r} names no grid_type in its inductor_meta")
    kernel.decorator_list = [d for d in kernel.decorator_list if d is not heur[0]]
    state_ieee_dots(kernel)
    args = kernel.args.posonlyargs + kernel.args.args
    constexprs = tuple(a.arg for a in args if a.annotation is not None and "constexpr" in ast.unparse(a.annotation))
    return TritonKernel(name=name, imports=tuple(imports), helpers=tuple(helpers), source=ast.unparse(kernel),
                        heuristic=ast.unparse(heur[0].func).split(".", 1)[1], grid_type=inductor_meta["grid_type"],
                        params=tuple(a.arg for a in args), constexprs=constexprs, inductor_meta=inductor_meta)


def grid_for(kernel: TritonKernel, sizes: dict, config_kwargs: dict) -> tuple[int, int, int]:
    """The launch grid Inductor's launcher computes for `sizes` (xnumel, ynumel, ...) and
    the chosen config's block sizes, by Inductor's own rule for the kernel's grid type."""
    from torch._inductor.runtime.triton_heuristics import GridExpr

    try:
        grid = GridExpr.from_meta(kernel.inductor_meta, dict(config_kwargs))
    except (KeyError, AssertionError, TypeError) as e:
        raise TritonSeedError(f"kernel {kernel.name!r}: no grid rule for grid_type {kernel.grid_type!r} "
                              f"({type(e).__name__}: {e})") from None
    scope = {**{k: v for k, v in sizes.items()}, **dict(config_kwargs)}
    try:
        values = grid.eval_slow(scope)
    except (NameError, TypeError) as e:
        raise TritonSeedError(f"kernel {kernel.name!r}: its grid ({grid.x_grid}, {grid.y_grid}, {grid.z_grid}) "
                              f"needs {e}") from None
    out = tuple(int(v) for v in values)
    if any(v < 1 for v in out):
        raise TritonSeedError(f"kernel {kernel.name!r}: grid {out} is empty")
    return out  # type: ignore[return-value]


def launch_source(kernel: TritonKernel, call: ast.Call, config: dict) -> str:
    """`kernel[grid](args..., BLOCKS..., num_warps=..., num_stages=...)` for one `.run(...)`
    of the wrapper (`call`, arguments already translated) with the chosen `config`
    ({"kwargs": {...}, "num_warps": n, "num_stages": n})."""
    extra = [k.arg for k in call.keywords if k.arg not in ("stream",)]
    if extra:
        raise TritonSeedError(f"kernel {kernel.name!r} is launched with {extra}; this Inductor version's "
                              "launch format is not handled (expected only stream=)")
    runtime = [p for p in kernel.params if p not in kernel.constexprs]
    # a template's launcher takes its grid after the kernel's arguments (FixedGrid)
    grid_args = [str(n) for n in kernel.inductor_meta.get("extra_launcher_args") or ()]
    if len(call.args) != len(runtime) + len(grid_args):
        raise TritonSeedError(f"kernel {kernel.name!r} takes {len(runtime)} runtime arguments"
                              f"{f' and {len(grid_args)} grid values' if grid_args else ''}, the wrapper "
                              f"passes {len(call.args)}")
    sizes = {}
    for p, a in zip(runtime + grid_args, call.args):
        if p.endswith("numel") or p in grid_args:
            if not isinstance(a, ast.Constant) or not isinstance(a.value, int):
                raise TritonSeedError(f"kernel {kernel.name!r}: {p} is {ast.unparse(a)}, not a constant "
                                      "(dynamic shapes)")
            sizes[p] = a.value
    kwargs = dict(config.get("kwargs") or {})
    grid = grid_for(kernel, sizes, kwargs)
    args = [ast.unparse(a) for a in call.args[:len(runtime)]]
    args += [f"{k}={v!r}" for k, v in kwargs.items() if k in kernel.params]
    args += [f"{k}={int(config[k])}" for k in LAUNCH_OPTIONS if config.get(k) is not None]
    return f"{kernel.name}[{grid!r}]({', '.join(args)})"
