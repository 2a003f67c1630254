"""Assemble a candidate file (KernelBench `ModelNew`) from a Description.

`ModelNew` subclasses the task's own `Model` (embedded as `_ReferenceModel`), so its
constructor signature, submodules and same-seed parameters are the reference's; only
`forward` is replaced: torch calls stay (matmul, convolution, pooling, views) and every
fused region runs as one kernel of the chosen backend.
"""

from __future__ import annotations

import ast
import textwrap

from foundry.templates.ir import Description
from foundry.templates.launch import TORCH_DTYPE, phase_ints, size_lines

REFERENCE_NAME = "_ReferenceModel"


class _Rename(ast.NodeTransformer):
    def visit_Name(self, node):
        if node.id == "Model":
            node.id = REFERENCE_NAME
        return node

    def visit_ClassDef(self, node):
        if node.name == "Model":
            node.name = REFERENCE_NAME
        self.generic_visit(node)
        return node


def reference_source(task_source: str) -> str:
    """The task file without its input generators, with `Model` renamed."""
    tree = ast.parse(task_source)
    drop = {"get_inputs", "get_init_inputs"}
    tree.body = [n for n in tree.body if not (isinstance(n, ast.FunctionDef) and n.name in drop)]
    tree = _Rename().visit(tree)
    return ast.unparse(ast.fix_missing_locations(tree))


def launcher_class(region, kernel_call: list[str]) -> str:
    """A small class whose __call__ computes sizes, allocates the output and runs the
    kernel; `kernel_call` are the backend's lines that launch it (they may use `args`,
    the size names and `out`)."""
    args = [f"a{i}" for i in range(len(region.inputs))]
    lines = [f"{a} = {a}.contiguous()" for a in args]
    lines += size_lines(region, args)
    lines.append(f"out = torch.empty(out_shape, dtype={TORCH_DTYPE[region.out_dtype]}, device={args[region.anchor]}.device)")
    lines += kernel_call
    lines.append("return out")
    body = textwrap.indent("\n".join(lines), " " * 8)
    cls = "_" + region.name.lstrip("_").upper()
    return f"""class {cls}:
    def __init__(self, kernel, params):
        self.kernel = kernel
        self.params = params

    def __call__(self, {', '.join(args)}):
{body}
"""


def kernel_args(region) -> list[str]:
    """Kernel arguments in order: inputs, output, integer sizes."""
    return [f"a{i}" for i in range(len(region.inputs))] + ["out"] + phase_ints(region)


def assemble(*, desc: Description, task_source: str, backend: str, header: str,
             kernel_defs: str, launchers: list[str], init_lines: list[str],
             tunable: dict, params: dict, note: str) -> str:
    fwd = textwrap.indent(desc.forward_src.strip("\n"), "    ")
    init = textwrap.indent("\n".join(init_lines), " " * 8)
    return f'''"""{note}"""
{header}


def _prod(xs):
    p = 1
    for x in xs:
        p *= int(x)
    return p


# ---- the reference module (its constructor builds the same submodules and parameters)
{reference_source(task_source)}

# ---- kernels ({backend})
TUNABLE = {tunable!r}
PARAMS = {params!r}

{kernel_defs}

{chr(10).join(launchers)}

class ModelNew({REFERENCE_NAME}):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        params = dict(PARAMS)
{init}

{fwd}
'''
