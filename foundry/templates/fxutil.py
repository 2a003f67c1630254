"""Small helpers over torch.fx nodes annotated by ShapeProp."""

from __future__ import annotations

import torch

_DTYPES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16", torch.bool: "bool",
           torch.int64: "int64", torch.int32: "int32"}


class NotCovered(ValueError):
    """No template applies to this forward; the message says why."""


def node_meta(node):
    """The tensor metadata ShapeProp recorded on an fx node (None where it recorded none)."""
    tm = node.meta.get("tensor_meta")
    return tm if tm is not None and hasattr(tm, "shape") else None


def tensor_dtypes(gm) -> set:
    """The dtypes of the tensors a traced graph's nodes produce (where shapes were recorded)."""
    return {m.dtype for n in gm.graph.nodes if (m := node_meta(n)) is not None}


def node_shape(node):
    """The shape of the tensor an fx node produces, or None."""
    tm = node_meta(node)
    return tuple(tm.shape) if tm is not None else None


def node_dtype(node):
    """The dtype name ("float32", ...) of the tensor an fx node produces, or None."""
    tm = node_meta(node)
    return _DTYPES.get(tm.dtype) if tm is not None else None


def shape_of(value) -> tuple | None:
    """The shape recorded for an fx node; None for a node without one or any other value
    (a number, None)."""
    return node_shape(value) if hasattr(value, "meta") else None


def dtype_name(dtype: torch.dtype) -> str | None:
    """The name the templates give a torch dtype (float32, int64, ...); None for one they
    do not know."""
    return _DTYPES.get(dtype)


def dtype_of(value) -> str | None:
    """The dtype name recorded for an fx node (float32, int64, ...); None as shape_of."""
    return node_dtype(value) if hasattr(value, "meta") else None
