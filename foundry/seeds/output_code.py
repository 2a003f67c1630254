"""Read Inductor's output code (the Python module torch.compile writes) into its parts.

The module defines each kernel through Inductor's `AsyncCompile`:

    cpp_fused_relu_0 = async_compile.cpp_pybinding(['float*', 'const float*'], r'''C++''')
    triton_poi_fused_relu_0 = async_compile.triton('triton_poi_fused_relu_0', '''Triton''',
                                                   device_str='cuda')

and one wrapper, `call(args)` (a module function, or `Runner.call(self, args)` in newer
versions), that unpacks `args`, allocates buffers, calls library kernels
(`extern_kernels.addmm(..., out=buf0)`) and launches its own. `parse_output_code` returns
the kernels and the wrapper's statements; it reads the text only (nothing is run).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from foundry.seeds.result import SeedError

KERNEL_KINDS = {"cpp_pybinding": "cpp", "triton": "triton"}


class OutputCodeError(SeedError):
    """The output code is not in a form this reader knows; the message names what."""


@dataclass(frozen=True)
class InductorKernel:
    """One generated kernel: `name` (the wrapper's variable), `kind` ("cpp" or "triton"),
    its source text, and for cpp kernels the C types of the pybinding's arguments."""

    name: str
    kind: str
    source: str
    arg_types: tuple = ()


@dataclass(frozen=True)
class OutputCode:
    kernels: tuple  # InductorKernel, in definition order
    arg_names: tuple  # the names call(args) unpacks args into
    body: tuple  # call's statements after the unpacking, each as source text


def _literal(node: ast.AST, what: str):
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise OutputCodeError(f"{what} is not a literal ({ast.unparse(node)[:80]})") from None


def _kernel(target: str, call: ast.Call) -> InductorKernel | None:
    func = call.func
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
            and func.value.id == "async_compile"):
        return None
    kind = KERNEL_KINDS.get(func.attr)
    if kind is None:
        raise OutputCodeError(f"kernel {target!r} is built by async_compile.{func.attr}, which seeds do not "
                              f"handle (known: {', '.join(sorted(KERNEL_KINDS))})")
    if kind == "cpp":
        if len(call.args) < 2:
            raise OutputCodeError(f"async_compile.cpp_pybinding for {target!r} has no source argument")
        types = tuple(_literal(call.args[0], f"the argument types of {target!r}"))
        return InductorKernel(target, kind, _literal(call.args[1], f"the source of {target!r}"), types)
    if len(call.args) < 2:
        raise OutputCodeError(f"async_compile.triton for {target!r} has no source argument")
    return InductorKernel(target, kind, _literal(call.args[1], f"the source of {target!r}"))


def _find_call(tree: ast.Module) -> ast.FunctionDef:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "call":
            return node
        if isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, ast.FunctionDef) and sub.name == "call":
                    return sub
    raise OutputCodeError("the output code defines no call(args) wrapper")


def _unpacked(stmt: ast.stmt, args_name: str) -> tuple | None:
    """The names of `a, b = args` (or `a, = args`), else None."""
    if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.value, ast.Name)
            and stmt.value.id == args_name):
        t = stmt.targets[0]
        if isinstance(t, (ast.Tuple, ast.List)) and all(isinstance(e, ast.Name) for e in t.elts):
            return tuple(e.id for e in t.elts)
        if isinstance(t, ast.Name):
            return (t.id,)
    return None


def parse_output_code(code: str) -> OutputCode:
    try:
        tree = ast.parse(code)
    except SyntaxError as e:
        raise OutputCodeError(f"the output code does not parse ({e.msg}, line {e.lineno})") from None
    kernels = []
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Call)):
            k = _kernel(node.targets[0].id, node.value)
            if k is not None:
                kernels.append(k)
    fn = _find_call(tree)
    params = [a.arg for a in fn.args.args if a.arg != "self"]
    if len(params) != 1:
        raise OutputCodeError(f"call() takes {params}, expected one argument list")
    body = list(fn.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # a docstring
    names = _unpacked(body[0], params[0]) if body else None
    if names is None:
        names = ()  # a graph without arguments; anything else reading args fails in translation
    else:
        body = body[1:]
    return OutputCode(kernels=tuple(kernels), arg_names=names, body=tuple(ast.unparse(s) for s in body))
