"""Output values as they travel the result channel (protocol.py): a JSON-able tree of
lists, tuples, dicts, scalars and tensor indices; the tensors travel beside it.

`encode_tree` runs on the worker's side; `decode_tree`, on the judge's, validates every
node and raises ProtocolError on anything unexpected (it never unpickles: a worker runs
untrusted code). A value that is neither a tensor, a container nor a scalar comes back as
an opaque placeholder naming its type.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from foundry.evaluate.protocol import ProtocolError


def encode_tree(obj: Any, tensors: list) -> Any:
    """Turn an output value into a JSON-able tree; tensors are appended to `tensors`."""
    if isinstance(obj, torch.Tensor):
        tensors.append(obj)
        return {"t": "tensor", "i": len(tensors) - 1}
    if isinstance(obj, (list, tuple)):
        return {"t": type(obj).__name__, "items": [encode_tree(o, tensors) for o in obj]}
    if isinstance(obj, dict):
        return {"t": "dict", "keys": [str(k) for k in obj],
                "items": [encode_tree(v, tensors) for v in obj.values()]}
    if obj is None or isinstance(obj, (bool, int)):
        return {"t": "scalar", "v": obj}
    if isinstance(obj, float):
        return {"t": "scalar", "v": obj if math.isfinite(obj) else repr(obj)}
    return {"t": "other", "type": type(obj).__name__}


def decode_tree(tree: Any, tensors: list, depth: int = 0) -> Any:
    """Inverse of encode_tree; raises ProtocolError on anything unexpected."""
    if depth > 32 or not isinstance(tree, dict):
        raise ProtocolError("malformed output tree")
    kind = tree.get("t")
    if kind == "tensor":
        i = tree.get("i")
        if type(i) is not int or not 0 <= i < len(tensors):
            raise ProtocolError("output tree names a missing tensor")
        return tensors[i]
    if kind in ("list", "tuple"):
        items = [decode_tree(x, tensors, depth + 1) for x in tree.get("items", [])]
        return items if kind == "list" else tuple(items)
    if kind == "dict":
        keys = tree.get("keys", [])
        items = [decode_tree(x, tensors, depth + 1) for x in tree.get("items", [])]
        return dict(zip(keys, items))
    if kind == "scalar":
        v = tree.get("v")
        if isinstance(v, str):
            return float(v) if v in ("nan", "inf", "-inf") else None
        return v
    if kind == "other":
        return _Opaque(str(tree.get("type", "?"))[:60])
    raise ProtocolError("unknown node in output tree")


class _Opaque:
    """An output value that is neither a tensor, a container nor a scalar."""

    def __init__(self, type_name: str):
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<{self.type_name}>"
