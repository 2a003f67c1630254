"""Write a region as a KernelBench task: its own `Model` (constructor making the region's
parameters with their real shapes, drawn like the real values), its input shapes as
module constants, `get_inputs` drawing inputs like the captured ones, `get_init_inputs`.

Two spellings: "torch" (modules and functions a kernel writer and the templates know:
nn.Linear, nn.LayerNorm, F.gelu, torch.add, ...), and "aten" (each ATen op called as
`torch.ops.aten.<op>.<overload>`, exact by construction), used where the torch spelling
of an exported region does not reproduce it. `param_map` says which task parameter is
which model parameter."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.fx as fx
import torch.nn as nn

from foundry.extract.observe import Observed
from foundry.extract.opkinds import callable_path, inplace_base, is_aten, op_name
from foundry.extract.split import Region, module_params, param_tensor
from foundry.extract.values import DRAW_SOURCE, TensorInfo

SPELLINGS = ("torch", "aten")
_FUNCTIONAL = ("gelu", "silu", "mish", "hardswish", "hardsigmoid", "hardtanh", "leaky_relu", "softplus",
               "relu6", "dropout", "scaled_dot_product_attention", "logsigmoid", "softsign")


_BATCH_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)


class NotExpressible(ValueError):
    """A node the chosen spelling cannot write (the message says which)."""


@dataclass(frozen=True)
class TaskSource:
    source: str
    spelling: str
    param_map: tuple  # ((task parameter path, model parameter path), ...)


def literal(v) -> str:
    """Python source for a constant argument."""
    if isinstance(v, float):
        if math.isnan(v):
            return 'float("nan")'
        if math.isinf(v):
            return 'float("inf")' if v > 0 else '-float("inf")'
        return repr(v)
    if isinstance(v, torch.device):
        return f"torch.device({str(v)!r})"
    if isinstance(v, (torch.dtype, torch.layout, torch.memory_format)):
        return str(v)
    if isinstance(v, (list, tuple)):
        inner = ", ".join(literal(x) for x in v)
        return f"[{inner}]" if isinstance(v, list) else f"({inner}{',' if len(v) == 1 else ''})"
    if v is None or isinstance(v, (bool, int, str)):
        return repr(v)
    raise NotExpressible(f"constant {v!r} of type {type(v).__name__}")


def with_dtype(ctor: str, tensors: list) -> str:
    """`ctor` (a torch.nn constructor call) with `dtype=` where its floating-point tensors
    are not of the default dtype (a bfloat16 model's nn.Linear(...) would make float32
    parameters)."""
    dtypes = {t.dtype for t in tensors if t.is_floating_point()}
    if not dtypes or dtypes == {torch.get_default_dtype()}:
        return ctor
    if len(dtypes) > 1:
        raise NotExpressible(f"{ctor}: its tensors mix dtypes {sorted(str(d) for d in dtypes)}")
    return f"{ctor[:-1]}, dtype={dtypes.pop()})"


class _Writer:
    def __init__(self, gm: fx.GraphModule, region: Region, obs: Observed, spelling: str):
        self.gm, self.region, self.obs, self.spelling = gm, region, obs, spelling
        self.modules = dict(gm.named_modules())
        self.by_name = {n.name: n for n in gm.graph.nodes}
        self.local = {self.by_name[n]: f"x{i}" for i, n in enumerate(region.inputs)}
        self.init: list[str] = []
        self.fills: list[str] = []
        self.param_map: list[tuple[str, str]] = []
        self.counts: dict[str, int] = {}
        self.imports = {"torch", "torch.nn as nn", "torch.nn.functional as F"}

    def fresh(self, stem: str) -> str:
        k = self.counts.get(stem, 0)
        self.counts[stem] = k + 1
        return f"{stem}{k}"

    def bind(self, task_path: str, model_path: str) -> None:
        t = param_tensor(self.gm, model_path)
        self.param_map.append((task_path, model_path))
        if t.is_floating_point():
            info = TensorInfo.of(t)
            self.fills.append(f"self.{task_path}.copy_({info.expr(literal(info.shape), spread_constant=True)})")

    def raw_param(self, node: fx.Node) -> str:
        """A parameter used by a function call: a Parameter (or buffer) of the task's Model."""
        for task_path, model_path in self.param_map:
            if model_path == node.target and "." not in task_path:
                return f"self.{task_path}"
        name = self.fresh("p")
        t = param_tensor(self.gm, node.target)
        if isinstance(t, nn.Parameter):
            self.init.append(f"self.{name} = nn.Parameter(torch.empty({literal(tuple(t.shape))}, "
                             f"dtype={t.dtype}), requires_grad={t.requires_grad})")
        else:
            self.init.append(f"self.register_buffer({name!r}, torch.zeros({literal(tuple(t.shape))}, dtype={t.dtype}))")
        self.bind(name, node.target)
        return f"self.{name}"

    def arg(self, a) -> str:
        if isinstance(a, fx.Node):
            if a.op == "get_attr":
                return self.raw_param(a)
            return self.local[a]
        if isinstance(a, (list, tuple)):
            inner = ", ".join(self.arg(x) for x in a)
            return f"[{inner}]" if isinstance(a, list) else f"({inner}{',' if len(a) == 1 else ''})"
        return literal(a)

    def call(self, fn: str, node: fx.Node, skip_first: bool = False) -> str:
        args = list(node.args[1:] if skip_first else node.args)
        kwargs = {k: v for k, v in node.kwargs.items() if k != "inplace"}
        parts = [self.arg(a) for a in args] + [f"{k}={self.arg(v)}" for k, v in kwargs.items()]
        return f"{fn}({', '.join(parts)})"

    # ------------------------------------------------------------ one node
    def expr(self, node: fx.Node) -> str:
        if node.op == "call_module":
            return self.leaf_module(node)
        if node.op == "call_method":
            base = self.arg(node.args[0])
            return f"{base}.{inplace_base(str(node.target))}" + self.call("", node, skip_first=True)
        if is_aten(node):
            name = op_name(node, self.modules)
            overload = str(node.target).rsplit(".", 1)[-1]
            if self.spelling == "torch":
                made = self.as_module(node, name)
                if made is not None:
                    return made
                if name in _FUNCTIONAL:
                    return self.call(f"F.{name}", node)
                if callable(getattr(torch, name, None)):
                    return self.call(f"torch.{name}", node)
            return self.call(f"torch.ops.aten.{name}.{overload}", node)
        path = callable_path(node.target)
        if path is None:
            raise NotExpressible(f"node {node.name}: cannot name {node.target!r}")
        if path.startswith("operator."):
            self.imports.add("operator")
        if path.startswith("torch.") or path.startswith("operator."):
            path = path if not path.endswith("_") else path[:-1]
        return self.call(path, node)

    def leaf_module(self, node: fx.Node) -> str:
        mod = self.modules[node.target]
        ctor = "nn." + repr(mod)
        try:
            made = eval(ctor, {"nn": nn, "torch": torch})  # noqa: S307 - our own repr of a torch.nn module
        except Exception as e:  # noqa: BLE001
            raise NotExpressible(f"module {node.target} ({type(mod).__name__}): its repr is not a constructor "
                                 f"({type(e).__name__})") from None
        theirs = {n: tuple(t.shape) for n, t in list(mod.named_parameters()) + list(mod.named_buffers())}
        ours = {n: tuple(t.shape) for n, t in list(made.named_parameters()) + list(made.named_buffers())}
        if type(made) is not type(mod) or theirs != ours:
            raise NotExpressible(f"module {node.target} ({type(mod).__name__}): {ctor} builds other parameters")
        if getattr(made, "inplace", False):
            ctor = ctor.replace("inplace=True", "inplace=False")
        ctor = with_dtype(ctor, [t for _, t in list(mod.named_parameters()) + list(mod.named_buffers())])
        if isinstance(mod, _BATCH_NORMS) and not mod.training and mod.track_running_stats:
            return self.batch_norm_leaf(node, ctor)
        name = self.fresh("m")
        self.init.append(f"self.{name} = {ctor}")
        for p in module_params(self.gm, node.target):
            self.bind(f"{name}.{p[len(node.target) + 1:]}", p)
        return f"self.{name}(" + ", ".join(self.arg(a) for a in node.args) + ")"

    def batch_norm_leaf(self, node: fx.Node, ctor: str) -> str:
        """An eval-mode BatchNorm leaf module in its inference form (see as_module)."""
        mod = self.modules[node.target]
        name = self.fresh("norm")
        self.init.append(f"self.{name} = {ctor}")
        for p in module_params(self.gm, node.target):
            self.bind(f"{name}.{p[len(node.target) + 1:]}", p)
        affine = f"self.{name}.weight, self.{name}.bias" if mod.affine else "None, None"
        momentum = 0.0 if mod.momentum is None else float(mod.momentum)
        return (f"F.batch_norm({self.arg(node.args[0])}, self.{name}.running_mean, self.{name}.running_var, "
                f"{affine}, training=False, momentum={literal(momentum)}, eps={literal(float(mod.eps))})")

    def as_module(self, node: fx.Node, name: str) -> str | None:
        """linear / conv / norms / embedding over parameters, as the torch.nn module."""
        a = list(node.args) + [None] * 9

        def param(x):
            return isinstance(x, fx.Node) and x.op == "get_attr"
        kw = node.kwargs
        if name == "linear" and param(a[1]) and (a[2] is None or param(a[2])) and not kw:
            w = param_tensor(self.gm, a[1].target)
            return self.module_call("linear", f"nn.Linear({w.shape[1]}, {w.shape[0]}, bias={a[2] is not None})",
                                    {"weight": a[1], "bias": a[2]}, a[0])
        if name in ("conv1d", "conv2d", "conv3d") and param(a[1]) and (a[2] is None or param(a[2])) and not kw:
            w = param_tensor(self.gm, a[1].target)
            dims = int(name[-2])
            stride, padding, dilation = (a[3] if a[3] is not None else 1), (a[4] if a[4] is not None else 0), \
                (a[5] if a[5] is not None else 1)
            groups = a[6] if a[6] is not None else 1
            ctor = (f"nn.Conv{dims}d({w.shape[1] * groups}, {w.shape[0]}, {literal(tuple(w.shape[2:]))}, "
                    f"stride={literal(stride)}, padding={literal(padding)}, dilation={literal(dilation)}, "
                    f"groups={groups}, bias={a[2] is not None})")
            return self.module_call("conv", ctor, {"weight": a[1], "bias": a[2]}, a[0])
        if name == "layer_norm" and not kw and (a[2] is None) <= (a[3] is None) and \
                all(x is None or param(x) for x in a[2:4]):
            eps = a[4] if a[4] is not None else 1e-5
            ctor = (f"nn.LayerNorm({literal(list(a[1]))}, eps={literal(float(eps))}, "
                    f"elementwise_affine={a[2] is not None}, bias={a[3] is not None})")
            return self.module_call("norm", ctor, {"weight": a[2], "bias": a[3]}, a[0])
        if name == "group_norm" and not kw and (a[2] is None) == (a[3] is None) and \
                all(x is None or param(x) for x in a[2:4]):
            channels = self.obs.info(a[0]).shape[1]
            eps = a[4] if a[4] is not None else 1e-5
            ctor = f"nn.GroupNorm({a[1]}, {channels}, eps={literal(float(eps))}, affine={a[2] is not None})"
            return self.module_call("norm", ctor, {"weight": a[2], "bias": a[3]}, a[0])
        if name == "batch_norm" and not kw and a[5] is False and param(a[3]) and param(a[4]) and \
                (a[1] is None) == (a[2] is None) and all(x is None or param(x) for x in a[1:3]):
            rank = len(self.obs.info(a[0]).shape)
            dims = {2: 1, 3: 1, 4: 2, 5: 3}.get(rank)
            if dims is None:
                return None
            channels = self.obs.info(a[0]).shape[1]
            ctor = (f"nn.BatchNorm{dims}d({channels}, eps={literal(float(a[7]))}, momentum={literal(float(a[6]))}, "
                    f"affine={a[1] is not None})")
            # the module holds the parameters; the call is the inference form, whatever mode the
            # task's Model is in (a BatchNorm module in training mode would use batch statistics)
            name = self.module_attr("norm", ctor, {"weight": a[1], "bias": a[2], "running_mean": a[3],
                                                   "running_var": a[4]})
            affine = f"{name}.weight, {name}.bias" if a[1] is not None else "None, None"
            return (f"F.batch_norm({self.arg(a[0])}, {name}.running_mean, {name}.running_var, {affine}, "
                    f"training=False, momentum={literal(float(a[6]))}, eps={literal(float(a[7]))})")
        if name == "embedding" and param(a[0]) and not kw:
            w = param_tensor(self.gm, a[0].target)
            return self.module_call("embedding", f"nn.Embedding({w.shape[0]}, {w.shape[1]})",
                                    {"weight": a[0]}, a[1])
        return None

    def module_attr(self, stem: str, ctor: str, params: dict) -> str:
        """A module of the task's Model built by `ctor` holding `params` (attr -> get_attr node)."""
        ctor = with_dtype(ctor, [param_tensor(self.gm, n.target) for n in params.values() if n is not None])
        name = self.fresh(stem)
        self.init.append(f"self.{name} = {ctor}")
        for attr, node in params.items():
            if node is not None:
                self.bind(f"{name}.{attr}", node.target)
        return f"self.{name}"

    def module_call(self, stem: str, ctor: str, params: dict, x) -> str:
        return f"{self.module_attr(stem, ctor, params)}({self.arg(x)})"


def write_task_source(gm: fx.GraphModule, region: Region, obs: Observed, *, spelling: str = "torch",
                      doc: str = "") -> TaskSource:
    """The task file's text for `region` (raises NotExpressible)."""
    if spelling not in SPELLINGS:
        raise ValueError(f"unknown spelling {spelling!r} (choose from {', '.join(SPELLINGS)})")
    w = _Writer(gm, region, obs, spelling)
    body = []
    for i, name in enumerate(region.nodes):
        node = w.by_name[name]
        var = f"v{i}"
        body.append(f"{var} = {w.expr(node)}")
        w.local[node] = var
    outs = [w.local[w.by_name[o]] for o in region.outputs]
    body.append("return " + ", ".join(outs))
    infos = [obs.infos[n] for n in region.inputs]
    consts = [f"x{i}_shape = {literal(tuple(info.shape))}" for i, info in enumerate(infos)]
    draws = [info.expr(f"x{i}_shape") for i, info in enumerate(infos)]
    init = w.init + (["with torch.no_grad():"] + ["    " + f for f in w.fills] if w.fills else [])
    level = 1 if len(region.nodes) == 1 else 2
    ind = "\n        "
    imports = "\n".join(f"import {m}" for m in sorted(w.imports))
    source = f'''"""{doc}"""

{imports}

{DRAW_SOURCE.strip()}


class Model(nn.Module):
    def __init__(self):
        super().__init__(){''.join(ind + line for line in init)}

    def forward(self, {", ".join(f"x{i}" for i in range(len(infos)))}):{''.join(ind + line for line in body)}


{chr(10).join(consts)}
LEVEL = {level}


def get_inputs():
    return [{", ".join(draws)}]


def get_init_inputs():
    return []
'''
    return TaskSource(source=source, spelling=spelling, param_map=tuple(w.param_map))
