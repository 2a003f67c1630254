"""Device-to-device transfer of a worker's CUDA outputs to the judge (CUDA IPC).

Worker side, `export(tensor)`: the output's allocation is exported with
``cuIpcGetMemHandle`` (the 64-byte handle plus the tensor's offset in it go into the
message header; no data crosses the host). The worker then waits for the judge's
acknowledgement before it runs anything that could reuse that memory.

Judge side, `IpcImporter.copy_out(...)`: opens each handle once
(``cuIpcOpenMemHandle``), checks with ``cuMemGetAddressRange`` that every declared
(offset, size) lies inside the mapped allocation (a lying worker cannot make the judge
read out of bounds), copies device-to-device into a buffer of its own that was filled
with 0xFF first (NaN for floats: a failed or partial copy never leaves an earlier result
readable), synchronizes, and closes the handles. All of this happens when the message
arrives, while the worker is alive and blocked; the worker is killed afterwards, and
reference outputs are computed only then. The judge never exports its own memory.

The driver API is reached with ctypes (libcuda.so.1 is on every machine with a CUDA
driver), not through torch's pickling reductions: those also open a reference-count file
and an IPC event named by the sender, both under the untrusted worker's control, and do
no bounds check. Anything unavailable (no driver symbol, expandable segments, memory not
from cudaMalloc) makes `export` return None; the worker then sends the bytes through the
host channel instead, so a verdict never depends on IPC working.
"""

from __future__ import annotations

import ctypes
import re
from typing import Any

HANDLE_BYTES = 64
CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1
_HEX = re.compile(r"[0-9a-f]{128}")


class IpcError(RuntimeError):
    """A CUDA IPC call failed (the message is the driver's error): the transfer is not
    possible here, and the worker is asked to send the bytes through the host instead."""


class IpcViolation(IpcError):
    """The worker's description of its output is malformed or out of bounds."""


class _Handle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_ubyte * HANDLE_BYTES)]


def handle_to_hex(h: _Handle) -> str:
    """All 64 bytes (a handle has zero bytes inside; c_char fields would stop at one)."""
    return ctypes.string_at(ctypes.addressof(h), HANDLE_BYTES).hex()


def handle_from_hex(text: str) -> _Handle:
    data = bytes.fromhex(text)
    if len(data) != HANDLE_BYTES:
        raise ValueError(f"a CUDA IPC handle has {HANDLE_BYTES} bytes, got {len(data)}")
    h = _Handle()
    ctypes.memmove(ctypes.addressof(h), data, HANDLE_BYTES)
    return h


class _Driver:
    def __init__(self) -> None:
        lib = ctypes.CDLL("libcuda.so.1")
        self.lib = lib

        def fn(*names: str, args: list) -> Any:
            for name in names:
                f = getattr(lib, name, None)
                if f is not None:
                    f.restype = ctypes.c_int
                    f.argtypes = args
                    return f
            raise IpcError(f"libcuda has none of {', '.join(names)}")

        u64, psize = ctypes.c_uint64, ctypes.POINTER(ctypes.c_size_t)
        self.get_range = fn("cuMemGetAddressRange_v2", "cuMemGetAddressRange",
                            args=[ctypes.POINTER(u64), psize, u64])
        self.get_handle = fn("cuIpcGetMemHandle", args=[ctypes.POINTER(_Handle), u64])
        self.open_handle = fn("cuIpcOpenMemHandle_v2", "cuIpcOpenMemHandle",
                              args=[ctypes.POINTER(u64), _Handle, ctypes.c_uint])
        self.close_handle = fn("cuIpcCloseMemHandle", args=[u64])
        self.memcpy = fn("cuMemcpyDtoD_v2", "cuMemcpyDtoD", args=[u64, u64, ctypes.c_size_t])
        self.error_string = fn("cuGetErrorString", args=[ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)])

    def check(self, code: int, what: str) -> None:
        if code != 0:
            text = ctypes.c_char_p()
            try:
                self.error_string(code, ctypes.byref(text))
            except Exception:  # noqa: BLE001
                pass
            msg = text.value.decode(errors="replace") if text.value else f"error {code}"
            raise IpcError(f"{what}: {msg}")

    def address_range(self, ptr: int) -> tuple[int, int]:
        base, size = ctypes.c_uint64(), ctypes.c_size_t()
        self.check(self.get_range(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(ptr)),
                   "cuMemGetAddressRange")
        return int(base.value), int(size.value)


_DRIVER: _Driver | None = None


def driver() -> _Driver:
    global _DRIVER
    if _DRIVER is None:
        _DRIVER = _Driver()
    return _DRIVER


def export(t: Any) -> dict | None:
    """Worker side: {"handle": hex, "offset": bytes into the allocation} for a contiguous
    CUDA tensor whose work has finished, or None when it cannot be exported."""
    try:
        d = driver()
        ptr = int(t.data_ptr())
        base, size = d.address_range(ptr)
        nbytes = t.numel() * t.element_size()
        if not (base <= ptr and ptr + nbytes <= base + size):
            return None
        h = _Handle()
        d.check(d.get_handle(ctypes.byref(h), ctypes.c_uint64(base)), "cuIpcGetMemHandle")
        return {"handle": handle_to_hex(h), "offset": ptr - base}
    except Exception:  # noqa: BLE001 - the host channel carries it instead
        return None


class IpcImporter:
    """Judge side: copies exported worker tensors into the judge's own device memory."""

    def __init__(self) -> None:
        import torch
        torch.cuda.init()
        torch.cuda.synchronize()  # the primary context is current on this thread now
        self.driver = driver()
        self.copied_bytes = 0

    def copy_out(self, items: list[dict]) -> list:
        """`items`: {"handle", "offset", "nbytes", "dtype", "shape"} each (validated
        shapes and dtypes). Returns judge-owned CUDA tensors; raises IpcError."""
        import torch
        torch.cuda.synchronize()  # makes the primary context current on this thread too
        d = self.driver
        opened: dict[str, tuple[int, int]] = {}
        out = []
        try:
            for it in items:
                handle = it["handle"]
                if not isinstance(handle, str) or not _HEX.fullmatch(handle):
                    raise IpcViolation("malformed CUDA IPC handle")
                offset, nbytes = it["offset"], it["nbytes"]
                if type(offset) is not int or offset < 0:
                    raise IpcViolation("malformed CUDA IPC offset")
                if handle not in opened:
                    h = handle_from_hex(handle)
                    ptr = ctypes.c_uint64()
                    d.check(d.open_handle(ctypes.byref(ptr), h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
                            "cuIpcOpenMemHandle")
                    base = int(ptr.value)
                    try:
                        rbase, rsize = d.address_range(base)
                    except IpcError:
                        d.close_handle(ctypes.c_uint64(base))
                        raise
                    opened[handle] = (base, rsize - (base - rbase))
                base, size = opened[handle]
                if offset + nbytes > size:
                    raise IpcViolation(f"declared output ({nbytes} bytes at offset {offset}) lies outside "
                                   f"the exported allocation ({size} bytes)")
                dst = torch.empty(max(nbytes, 1), dtype=torch.uint8, device="cuda")
                dst.fill_(0xFF)
                torch.cuda.synchronize()
                d.check(d.memcpy(ctypes.c_uint64(dst.data_ptr()), ctypes.c_uint64(base + offset),
                                 ctypes.c_size_t(nbytes)), "cuMemcpyDtoD")
                self.copied_bytes += nbytes
                out.append(dst[:nbytes].view(it["dtype"]).reshape(it["shape"]))
            torch.cuda.synchronize()
        finally:
            for base, _ in opened.values():
                try:
                    d.close_handle(ctypes.c_uint64(base))
                except Exception:  # noqa: BLE001
                    pass
        return out
