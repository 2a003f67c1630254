"""The result channel between a sandbox worker and the judge.

A message is a frame: magic ``KF1``, a 4-byte header length, a JSON header, then one
raw byte block per tensor listed in the header (``{"dtype", "shape", "nbytes"}``).
Nothing is ever unpickled on the judge's side: a worker runs untrusted code, so the
judge parses only JSON and raw bytes, validates every field, and treats anything
malformed as a protocol violation (a failed candidate), never as a verdict.
Output values are trees of lists/tuples/dicts of tensors and scalars.
"""

from __future__ import annotations

import json
import math
import os
import select
import struct
import time
from typing import Any

import torch

MAGIC = b"KF1"
MAX_HEADER = 8 << 20

DTYPES = {
    str(d).removeprefix("torch."): d for d in (
        torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
        torch.int16, torch.int32, torch.int64, torch.bool, torch.complex64, torch.complex128)
}


class ProtocolError(RuntimeError):
    """A worker sent something that is not a well-formed message."""


class ChannelClosed(ProtocolError):
    """The worker closed its end (it exited or crashed)."""


class ChannelTimeout(ProtocolError):
    """No complete message arrived before the deadline."""


# ---------------------------------------------------------------- encoding (worker side)

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


def _tensor_bytes(t: torch.Tensor) -> tuple[dict, bytes]:
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    t = t.contiguous()
    dtype = str(t.dtype).removeprefix("torch.")
    data = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
    return {"dtype": dtype, "shape": list(t.shape), "nbytes": len(data)}, data


def pack(header: dict, tensors: list | tuple = ()) -> bytes:
    metas, blobs = [], []
    for t in tensors:
        meta, data = _tensor_bytes(t)
        metas.append(meta)
        blobs.append(data)
    head = json.dumps({**header, "tensors": metas}, allow_nan=False, default=str).encode()
    return MAGIC + struct.pack("<I", len(head)) + head + b"".join(blobs)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def send(fd: int, header: dict, tensors: list | tuple = ()) -> None:
    write_all(fd, pack(header, tensors))


# ---------------------------------------------------------------- decoding (judge side)

class Reader:
    """Reads frames from a worker's result pipe with deadlines and a size cap."""

    def __init__(self, fd: int, *, max_bytes: int):
        self.fd = fd
        self.max_bytes = max_bytes
        self._buf = bytearray()
        self.total = 0
        self.closed = False

    def _fill(self, need: int, deadline: float) -> None:
        while len(self._buf) < need:
            if self.closed:
                raise ChannelClosed("worker closed the result channel")
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChannelTimeout("deadline passed")
            ready, _, _ = select.select([self.fd], [], [], min(left, 0.05))
            if not ready:
                continue
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                self.closed = True
                raise ChannelClosed("worker closed the result channel")
            self.total += len(chunk)
            if self.total > self.max_bytes:
                raise ProtocolError(f"worker sent more than {self.max_bytes} bytes")
            self._buf += chunk

    def _take(self, n: int) -> bytes:
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out

    def read(self, deadline: float) -> tuple[dict, list[torch.Tensor]]:
        """The next message: (header, tensors). Raises ChannelClosed/ChannelTimeout/ProtocolError.
        A timeout leaves a partly received message buffered for the next call."""
        self._fill(7, deadline)
        if bytes(self._buf[:3]) != MAGIC:
            raise ProtocolError("malformed frame on the result channel")
        (hlen,) = struct.unpack("<I", bytes(self._buf[3:7]))
        if hlen > MAX_HEADER:
            raise ProtocolError("oversized header on the result channel")
        self._fill(7 + hlen, deadline)
        try:
            header = json.loads(bytes(self._buf[7:7 + hlen]))
        except ValueError:
            raise ProtocolError("header is not JSON") from None
        if not isinstance(header, dict) or not isinstance(header.get("tensors", []), list):
            raise ProtocolError("header is not an object")
        metas = [self._check_meta(m) for m in header.get("tensors", [])]
        total = sum(m[2] for m in metas)
        if total > self.max_bytes:
            raise ProtocolError("message larger than the channel allows")
        self._fill(7 + hlen + total, deadline)
        self._take(7 + hlen)
        tensors = []
        for shape, dtype, nbytes in metas:
            data = self._take(nbytes)
            if nbytes == 0:
                tensors.append(torch.empty(shape, dtype=dtype))
            else:
                tensors.append(torch.frombuffer(bytearray(data), dtype=dtype).reshape(shape))
        return header, tensors

    @staticmethod
    def _check_meta(meta: Any) -> tuple:
        if not isinstance(meta, dict) or meta.get("dtype") not in DTYPES:
            raise ProtocolError(f"bad tensor description {str(meta)[:100]}")
        shape = meta.get("shape")
        nbytes = meta.get("nbytes")
        if (not isinstance(shape, list) or len(shape) > 16
                or not all(type(s) is int and s >= 0 for s in shape)
                or type(nbytes) is not int or nbytes < 0):
            raise ProtocolError(f"bad tensor shape {str(meta)[:100]}")
        dtype = DTYPES[meta["dtype"]]
        if math.prod(shape) * torch.empty((), dtype=dtype).element_size() != nbytes:
            raise ProtocolError("tensor size does not match its shape")
        return shape, dtype, nbytes


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
