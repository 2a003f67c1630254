"""What kind of op a graph node is, in both graphs capture makes: ATen ops (torch.export)
and torch-level calls (torch.fx: functions, tensor methods, leaf modules).

Kinds: an anchor (matmul, conv, attention, norm, embedding, a recurrent layer: one per
region), a pointwise
or reduction op (chained around anchors, or a region of their own; batch norm in eval
mode is pointwise, a per-channel affine map), or "other" (views, tuple items, constants,
anything not worth a kernel: it stays outside every region)."""

from __future__ import annotations

import operator

import torch
import torch.fx as fx
import torch.nn as nn

ANCHORS = {
    "matmul": ("linear", "mm", "bmm", "matmul", "addmm", "baddbmm", "addmv", "addbmm", "einsum"),
    "conv": ("conv1d", "conv2d", "conv3d", "convolution", "conv_transpose1d", "conv_transpose2d",
             "conv_transpose3d"),
    "attention": ("scaled_dot_product_attention",),
    "norm": ("layer_norm", "group_norm", "batch_norm", "instance_norm", "rms_norm",
             "_native_batch_norm_legit_no_training", "native_layer_norm", "native_group_norm"),
    "embedding": ("embedding",),
    # a whole recurrent layer stack (its time loop inside one ATen call); its value is a
    # tuple (output, h_n[, c_n]), whose items join its region (foundry.extract.split)
    "recurrent": ("lstm", "gru", "rnn_tanh", "rnn_relu"),
}
POINTWISE = ("add", "sub", "mul", "div", "rsub", "neg", "abs", "relu", "gelu", "silu", "sigmoid", "tanh",
             "exp", "expm1", "log", "log1p", "sqrt", "rsqrt", "pow", "square", "reciprocal", "clamp",
             "clamp_min", "clamp_max", "hardtanh", "relu6", "leaky_relu", "elu", "selu", "celu",
             "softplus", "mish", "hardswish", "hardsigmoid", "logsigmoid", "softsign", "erf", "sin",
             "cos", "where", "masked_fill", "maximum", "minimum", "lerp", "addcmul", "addcdiv",
             "floor", "ceil", "round", "sign", "eq", "ne", "gt", "lt", "ge", "le", "logical_not",
             "logical_and", "logical_or", "dropout", "alpha_dropout", "truediv", "floordiv")
REDUCTIONS = ("sum", "mean", "amax", "amin", "softmax", "log_softmax", "_softmax", "_log_softmax",
              "logsumexp", "var", "std", "prod", "norm", "linalg_vector_norm", "cumsum", "argmax",
              "argmin", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "avg_pool1d", "avg_pool2d",
              "avg_pool3d", "max_pool1d", "max_pool2d", "max_pool3d")
TRIVIAL = ("dropout", "alpha_dropout")  # identity at inference: a region of only these is not worth a kernel

_KIND = {name: kind for kind, names in ANCHORS.items() for name in names}
_KIND.update({name: "pointwise" for name in POINTWISE})
_KIND.update({name: "reduction" for name in REDUCTIONS})

# leaf modules of a torch.fx graph, by the op they compute
_MODULE_OPS = {nn.Linear: "linear", nn.Conv1d: "conv1d", nn.Conv2d: "conv2d", nn.Conv3d: "conv3d",
               nn.ConvTranspose1d: "conv_transpose1d", nn.ConvTranspose2d: "conv_transpose2d",
               nn.ConvTranspose3d: "conv_transpose3d", nn.LayerNorm: "layer_norm", nn.GroupNorm: "group_norm",
               nn.BatchNorm1d: "batch_norm", nn.BatchNorm2d: "batch_norm", nn.BatchNorm3d: "batch_norm",
               nn.InstanceNorm1d: "instance_norm", nn.InstanceNorm2d: "instance_norm",
               nn.InstanceNorm3d: "instance_norm", nn.Embedding: "embedding", nn.ReLU: "relu", nn.GELU: "gelu",
               nn.SiLU: "silu", nn.Sigmoid: "sigmoid", nn.Tanh: "tanh", nn.LeakyReLU: "leaky_relu",
               nn.ELU: "elu", nn.SELU: "selu", nn.Softplus: "softplus", nn.Mish: "mish",
               nn.Hardswish: "hardswish", nn.Hardsigmoid: "hardsigmoid", nn.Hardtanh: "hardtanh",
               nn.ReLU6: "relu6", nn.Dropout: "dropout", nn.Softmax: "softmax", nn.LogSoftmax: "log_softmax",
               nn.AdaptiveAvgPool2d: "adaptive_avg_pool2d", nn.AvgPool2d: "avg_pool2d",
               nn.MaxPool2d: "max_pool2d", nn.LSTM: "lstm", nn.GRU: "gru"}
if hasattr(nn, "RMSNorm"):
    _MODULE_OPS[nn.RMSNorm] = "rms_norm"


def is_aten(node: fx.Node) -> bool:
    return node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload)


def inplace_base(name: str) -> str:
    """`relu_` -> `relu` (an in-place ATen op's functional name); other names unchanged."""
    return name[:-1] if name.endswith("_") and not name.endswith("__") else name


def op_name(node: fx.Node, modules: dict) -> str | None:
    """The op's name (`linear`, `gelu`, `add`, ...), in-place variants under their
    functional name; None for placeholders, outputs and parameters."""
    if node.op == "call_function":
        if is_aten(node):
            return inplace_base(node.target.overloadpacket.__name__)
        if node.target is operator.getitem:
            return "getitem"
        return inplace_base(getattr(node.target, "__name__", str(node.target)))
    if node.op == "call_method":
        return inplace_base(str(node.target))
    if node.op == "call_module":
        mod = modules.get(node.target)
        return _MODULE_OPS.get(type(mod), type(mod).__name__)
    return None


def is_inplace(node: fx.Node, modules: dict) -> bool:
    if node.op == "call_function" and is_aten(node):
        return node.target.overloadpacket.__name__.endswith("_")
    if node.op == "call_method":
        return str(node.target).endswith("_") and not str(node.target).endswith("__")
    if node.op == "call_function":
        return getattr(node.target, "__name__", "").endswith("_")
    if node.op == "call_module":
        return bool(getattr(modules.get(node.target), "inplace", False))
    return False


def kind_of(node: fx.Node, modules: dict) -> str:
    """"matmul" | "conv" | "attention" | "norm" | "embedding" | "recurrent" | "pointwise" |
    "reduction" | "other"."""
    name = op_name(node, modules)
    if name is None:
        return "other"
    if node.op == "call_module" and name not in _MODULE_OPS.values():
        return "other"
    kind = _KIND.get(name, "other")
    if kind == "norm" and name == "batch_norm":
        # training mode updates running statistics: not a pure function; in eval mode it is a
        # per-channel affine map, which joins the convolution or matmul before it
        return "other" if _training_batch_norm(node, modules) else "pointwise"
    return kind


def _training_batch_norm(node: fx.Node, modules: dict) -> bool:
    if node.op == "call_module":
        return bool(modules[node.target].training)
    training = node.args[5] if len(node.args) > 5 else node.kwargs.get("training", False)
    return bool(training)


def is_anchor(kind: str) -> bool:
    return kind in ANCHORS


_NAMESPACES = (("operator", operator), ("torch", torch), ("F", torch.nn.functional),
               ("torch.special", torch.special), ("torch.linalg", torch.linalg))


def callable_path(fn) -> str | None:
    """How generated source names a torch-level function (`torch.relu`, `F.gelu`,
    `operator.add`); None when it is none of these namespaces' own."""
    name = getattr(fn, "__name__", None)
    if not name:
        return None
    for prefix, ns in _NAMESPACES:
        if getattr(ns, name, None) is fn:
            return f"{prefix}.{name}"
    return None


def flat_nodes(args) -> list:
    """The fx Nodes among (nested) args, in order."""
    out: list = []
    fx.node.map_arg(args, lambda n: out.append(n))
    return out
