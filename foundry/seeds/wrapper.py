"""Turn the statements of Inductor's `call(args)` into the body of a candidate's forward.

What the wrapper does stays as it is: the same buffers (`torch.empty_strided` with
Inductor's sizes and strides, on the inputs' device), the same views
(`reinterpret_tensor` -> `_reinterpret`), the same library GEMM/convolution calls
(`extern_kernels.addmm(..., out=buf0)` -> `torch.addmm(...)`; `extern_kernels.convolution`
-> `_convolution`, i.e. `F.convNd`), the same size/stride checks (`_check_layout`), and
each kernel launch rewritten by the backend (`launch`). Anything else the wrapper calls
(a fallback to an ATen op, a name this module does not know) stops the translation with
a `WrapperError` naming it: a seed computes with its own kernels or not at all.
"""

from __future__ import annotations

import ast
from typing import Callable

from foundry.evaluate.static_checks import dotted_name
from foundry.seeds.output_code import InductorKernel, OutputCode
from foundry.seeds.result import SeedError

# library calls the judge allows where the task has them (foundry.evaluate.verdict.LIBRARY_OPS)
LIBRARY_CALLS = frozenset({"mm", "bmm", "addmm", "baddbmm", "addmv", "mv", "dot"})
ALLOCATORS = frozenset({"empty_strided_cpu", "empty_strided_cuda", "empty_strided_xpu", "empty_strided"})
DROPPED_CALLS = frozenset({"args.clear", "assert_alignment", "torch.cuda.set_device", "run_intermediate_hooks"})
DEVICE_GUARDS = ("torch.cuda._DeviceGuard", "torch.xpu._DeviceGuard")
STREAM_GETTERS = frozenset({"get_raw_stream"})
# names the translated body may read besides its own locals
BUILTIN_NAMES = frozenset({"torch", "F", "dev", "self", "_reinterpret", "_check_layout", "_convolution",
                           "None", "True", "False"})

HELPERS = '''
def _reinterpret(t, size, stride, offset):
    """Inductor's reinterpret_tensor: a view of t's storage, offset from t's own offset."""
    return t.as_strided(size, stride, t.storage_offset() + offset)


def _check_layout(t, size, stride, what):
    if tuple(t.shape) != tuple(size) or tuple(t.stride()) != tuple(stride):
        raise ValueError(f"{what}: size {tuple(t.shape)} stride {tuple(t.stride())}, but this seed's kernels "
                         f"were generated for size {tuple(size)} stride {tuple(stride)}")


def _convolution(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """Inductor's extern convolution, as the library call torch.nn.functional makes."""
    n = weight.dim() - 2
    if transposed:
        if n == 1:
            return F.conv_transpose1d(x, weight, bias, stride, padding, output_padding, groups, dilation)
        if n == 2:
            return F.conv_transpose2d(x, weight, bias, stride, padding, output_padding, groups, dilation)
        return F.conv_transpose3d(x, weight, bias, stride, padding, output_padding, groups, dilation)
    if n == 1:
        return F.conv1d(x, weight, bias, stride, padding, dilation, groups)
    if n == 2:
        return F.conv2d(x, weight, bias, stride, padding, dilation, groups)
    return F.conv3d(x, weight, bias, stride, padding, dilation, groups)
'''

Launch = Callable[[ast.Call, InductorKernel], str]


class WrapperError(SeedError):
    """The wrapper does something a seed cannot keep; the message names it."""


def dotted(node: ast.AST) -> str:
    return dotted_name(node) or ""


def _call(func: str, args: list, keywords: list) -> ast.Call:
    return ast.Call(func=ast.parse(func, mode="eval").body, args=args, keywords=keywords)


class _Expressions(ast.NodeTransformer):
    """Rewrites the calls inside one expression; every name read must be known."""

    def __init__(self, known: set) -> None:
        self.known = known

    def visit_Name(self, node: ast.Name):
        if isinstance(node.ctx, ast.Load) and node.id not in self.known and node.id not in BUILTIN_NAMES:
            raise WrapperError(f"the wrapper reads {node.id!r}, which a seed does not have (a constant or "
                               "module-level value of the output code)")
        return node

    def visit_Call(self, node: ast.Call):
        name = dotted(node.func)
        node.args = [self.visit(a) for a in node.args]
        node.keywords = [ast.keyword(k.arg, self.visit(k.value)) for k in node.keywords]
        short = name.rsplit(".", 1)[-1]
        if name in ALLOCATORS:
            if name == "empty_strided":  # empty_strided(size, stride, device=..., dtype=...)
                dtype = [k for k in node.keywords if k.arg == "dtype"]
                return _call("torch.empty_strided", node.args[:2],
                             dtype + [ast.keyword("device", ast.Name("dev", ast.Load()))])
            if len(node.args) != 3:
                raise WrapperError(f"{name} with {len(node.args)} arguments (expected size, stride, dtype)")
            return _call("torch.empty_strided", node.args[:2],
                         [ast.keyword("dtype", node.args[2]), ast.keyword("device", ast.Name("dev", ast.Load()))])
        if name == "reinterpret_tensor":
            return _call("_reinterpret", node.args, node.keywords)
        if name.startswith("extern_kernels."):
            if short in LIBRARY_CALLS:
                return _call(f"torch.{short}", node.args, node.keywords)
            if short == "convolution":
                return _call("_convolution", node.args, node.keywords)
            raise WrapperError(f"the wrapper calls {name}, a library kernel seeds do not map to a torch call")
        if name.startswith(("torch.ops.", "aten.")):
            raise WrapperError(f"Inductor left {name.replace('torch.ops.', '')} to PyTorch (a fallback "
                               "kernel); a seed would compute it with torch")
        if name.endswith((".size", ".stride", ".storage_offset")):
            return node
        raise WrapperError(f"the wrapper calls {name or ast.unparse(node.func)!r}, which seeds do not translate")


def _assigned(stmt: ast.stmt) -> set:
    return {n.id for t in getattr(stmt, "targets", []) for n in ast.walk(t) if isinstance(n, ast.Name)}


class _Body:
    def __init__(self, kernels: dict, launch: Launch, known: set, labels: dict) -> None:
        self.kernels, self.launch, self.known, self.labels = kernels, launch, known, labels
        self.lines: list[str] = []
        self.returned: ast.AST | None = None

    def expr(self, node: ast.AST) -> ast.AST:
        return _Expressions(self.known).visit(node)

    def statement(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.With) and all(dotted(i.context_expr.func) in DEVICE_GUARDS
                                              for i in stmt.items if isinstance(i.context_expr, ast.Call)):
            for s in stmt.body:
                self.statement(s)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            self.call(stmt.value)
        elif isinstance(stmt, ast.Assign):
            if isinstance(stmt.value, ast.Call) and dotted(stmt.value.func) in STREAM_GETTERS:
                return  # launches run on the current stream
            value = self.expr(stmt.value)
            self.known |= _assigned(stmt)
            self.lines.append(ast.unparse(ast.Assign(targets=stmt.targets, value=value, lineno=0)))
        elif isinstance(stmt, ast.Delete):
            self.lines.append(ast.unparse(stmt))
        elif isinstance(stmt, ast.Return):
            if stmt.value is None:
                raise WrapperError("the wrapper returns nothing")
            self.returned = self.expr(stmt.value)
        elif isinstance(stmt, ast.Pass):
            return
        else:
            raise WrapperError(f"the wrapper has a statement seeds do not translate: {ast.unparse(stmt)[:80]}")

    def call(self, call: ast.Call) -> None:
        name = dotted(call.func)
        if name in DROPPED_CALLS:
            return
        if name == "assert_size_stride":
            x, size, stride = (self.expr(a) for a in call.args[:3])
            what = ast.unparse(x)
            if what in self.labels:
                what = self.labels[what]
            elif len(call.args) > 3 and isinstance(call.args[3], ast.Constant):
                what = f"{what} (made by {call.args[3].value})"
            self.lines.append(ast.unparse(_call("_check_layout", [x, size, stride, ast.Constant(what)], [])))
            return
        base = name[:-4] if name.endswith(".run") else name
        if base in self.kernels:
            call.args = [self.expr(a) for a in call.args]
            call.keywords = [ast.keyword(k.arg, self.expr(k.value)) if k.arg != "stream" else k
                             for k in call.keywords]
            self.lines.append(self.launch(call, self.kernels[base]))
            return
        self.lines.append(ast.unparse(self.expr(call)))


def _output_expr(returned: ast.AST, outputs: tuple, kind: str, input_names: tuple) -> str:
    elts = returned.elts if isinstance(returned, (ast.Tuple, ast.List)) else [returned]
    picked = []
    for where, k in outputs:
        if where == "graph":
            if k >= len(elts):
                raise WrapperError(f"forward's output is wrapper output {k}, but the wrapper returns {len(elts)}")
            picked.append(ast.unparse(elts[k]))
        else:
            picked.append(input_names[k])
    if kind == "tensor":
        return picked[0]
    if kind == "list":
        return "[" + ", ".join(picked) + "]"
    return "(" + ", ".join(picked) + ("," if len(picked) == 1 else "") + ")"


def translate(code: OutputCode, *, launch: Launch, outputs: tuple, output_kind: str,
              input_names: tuple, graph_args: tuple) -> list[str]:
    """The run method's body: bind each of call's argument names (from `graph_args`,
    capture.GraphArg), the wrapper's statements translated, and the return of forward's
    outputs. `input_names` are forward's parameter names."""
    if len(code.arg_names) != len(graph_args):
        raise WrapperError(f"call() unpacks {len(code.arg_names)} arguments, the compiled graph got "
                           f"{len(graph_args)}")
    lines, labels = [], {}
    for name, g in zip(code.arg_names, graph_args):
        if g.kind == "input":
            lines.append(f"{name} = {input_names[g.index]}")
            labels[name] = f"input {input_names[g.index]}"
        else:
            lines.append(f"{name} = self.{_attr_path(g.name)}")
            labels[name] = f"self.{g.name}"
    lines.append(f"dev = {code.arg_names[0]}.device" if code.arg_names else "dev = torch.device('cpu')")
    body = _Body({k.name: k for k in code.kernels}, launch, set(code.arg_names) | set(input_names), labels)
    for text in code.body:
        for stmt in ast.parse(text).body:
            body.statement(stmt)
    if body.returned is None:
        raise WrapperError("the wrapper has no return statement")
    lines += body.lines
    lines.append("return " + _output_expr(body.returned, outputs, output_kind, input_names))
    return lines


def _attr_path(dotted_name: str) -> str:
    """'layers.0.weight' -> 'layers[0].weight' (ModuleList/Sequential items by index)."""
    out = ""
    for part in dotted_name.split("."):
        if part.isdigit():
            out += f"[{part}]"
        elif part.isidentifier():
            out += ("." if out else "") + part
        else:
            raise WrapperError(f"parameter {dotted_name!r} has a name part {part!r} seeds cannot write")
    return out
