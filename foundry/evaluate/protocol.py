"""The result channel between a sandbox worker and the judge.

A message is a frame: magic ``KF1``, a 4-byte header length, a JSON header, then one
raw byte block per inline tensor listed in the header (``{"dtype", "shape", "nbytes"}``).
Large tensors do not travel through the pipe (which costs several copies and seconds per
512 MiB); their description says where the bytes are instead:

- ``"shm": offset``: raw bytes in the job's result file (a sealed memfd the judge made,
  fixed size, append-only: every region starts at or after the end of the previous one).
  The judge copies the region into its own memory when the message arrives (later
  writes by the worker cannot change what was received) and frees the pages.
- ``"cuda_ipc": {"handle", "offset"}``: a CUDA output exported by the worker
  (foundry.evaluate.cuda_ipc). The judge copies it device-to-device into its own memory
  when the message arrives, then writes one byte on the job pipe: ``a`` (copied; the
  worker may go on) or ``n`` (IPC is not possible here; the worker sends the message
  again through the host channel).
Nothing is ever unpickled on the judge's side: a worker runs untrusted code, so the
judge parses only JSON and raw bytes, validates every field, and treats anything
malformed as a protocol violation (a failed candidate), never as a verdict.
Output values are trees of lists/tuples/dicts of tensors and scalars (output_tree.py).
"""

from __future__ import annotations

import json
import math
import os
import select
import struct
import time
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from foundry.evaluate.job import Job

MAGIC = b"KF1"
MAX_HEADER = 8 << 20
SHM_MIN_BYTES = 1 << 16  # smaller tensors travel inline
SHM_ALIGN = 64

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


# ---------------------------------------------------------------- the job (judge -> worker)

MAX_JOB = 64 << 20


def write_job(fd: int, job: "Job") -> None:
    """The judge's end: a 4-byte length, then the job's JSON."""
    data = job.to_json()
    write_all(fd, len(data).to_bytes(4, "little") + data)


def read_job(fd: int) -> "Job":
    """The worker's end of `write_job`; raises EOFError on a short read, JobError on a
    malformed job."""
    from foundry.evaluate.job import Job

    def read_exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = os.read(fd, n - len(data))
            if not chunk:
                raise EOFError(f"the job pipe closed after {len(data)} of {n} bytes")
            data += chunk
        return data

    n = int.from_bytes(read_exactly(4), "little")
    if n > MAX_JOB:
        raise EOFError(f"a job of {n} bytes is larger than {MAX_JOB}")
    return Job.from_json(read_exactly(n))


def _aligned(n: int) -> int:
    return (n + SHM_ALIGN - 1) // SHM_ALIGN * SHM_ALIGN


class Channel:
    """The worker's end: sends messages, putting large tensors in the result file or
    exporting CUDA ones, and waits for the judge's acknowledgement of exported ones."""

    def __init__(self, result_fd: int, *, ack_fd: int = -1, shm_fd: int = -1, cuda_ipc: bool = False):
        self.fd = result_fd
        self.ack_fd = ack_fd
        self.shm_fd = shm_fd
        self.capacity = os.fstat(shm_fd).st_size if shm_fd >= 0 else 0
        self.next = 0
        self.cuda_ipc = cuda_ipc and ack_fd >= 0

    def _write_shm(self, offset: int, data: torch.Tensor) -> None:
        import mmap
        start = offset - offset % mmap.ALLOCATIONGRANULARITY
        n = data.numel()
        mm = mmap.mmap(self.shm_fd, offset + n - start, mmap.MAP_SHARED,
                       mmap.PROT_READ | mmap.PROT_WRITE, offset=start)
        try:
            dst = torch.frombuffer(mm, dtype=torch.uint8, count=n, offset=offset - start)
            dst.copy_(data)
            del dst
        finally:
            mm.close()

    def send(self, header: dict, tensors: list | tuple = ()) -> None:
        metas, blobs, exported = [], [], []
        if self.cuda_ipc and any(isinstance(t, torch.Tensor) and t.is_cuda for t in tensors):
            torch.cuda.synchronize()
        for t in tensors:
            t = t.detach()
            dtype = str(t.dtype).removeprefix("torch.")
            nbytes = t.numel() * t.element_size()
            meta = {"dtype": dtype, "shape": list(t.shape), "nbytes": nbytes}
            if nbytes and t.is_cuda and self.cuda_ipc:
                from foundry.evaluate import cuda_ipc
                c = t.contiguous()
                info = cuda_ipc.export(c)
                if info is None:  # e.g. not from cudaMalloc: a copy from the caching allocator
                    c = c.clone()
                    torch.cuda.synchronize()
                    info = cuda_ipc.export(c)
                if info is not None:
                    exported.append(c)  # alive until the judge has copied it
                    metas.append({**meta, "cuda_ipc": info})
                    continue
            if t.device.type != "cpu":
                t = t.cpu()
            data = t.contiguous().reshape(-1).view(torch.uint8) if nbytes else None
            offset = _aligned(self.next)
            if nbytes >= SHM_MIN_BYTES and offset + nbytes <= self.capacity:
                self._write_shm(offset, data)
                self.next = offset + nbytes
                metas.append({**meta, "shm": offset})
            else:
                metas.append(meta)
                blobs.append(data.numpy().tobytes() if nbytes else b"")
        head = json.dumps({**header, "tensors": metas}, allow_nan=False, default=str).encode()
        write_all(self.fd, MAGIC + struct.pack("<I", len(head)) + head + b"".join(blobs))
        if exported:
            answer = os.read(self.ack_fd, 1)
            del exported
            if answer != b"a":  # the judge cannot map it: the same message through the host
                self.cuda_ipc = False
                self.send(header, tensors)


# ---------------------------------------------------------------- decoding (judge side)

class Reader:
    """Reads frames from a worker's result pipe with deadlines and a size cap."""

    def __init__(self, fd: int, *, max_bytes: int, shm_fd: int = -1, importer: Any = None):
        self.fd = fd
        self.max_bytes = max_bytes
        self._buf = bytearray()
        self.total = 0  # tensor bytes received, through any route
        self.piped = 0  # bytes read from the pipe
        self.closed = False
        self.shm_fd = shm_fd
        self.capacity = os.fstat(shm_fd).st_size if shm_fd >= 0 else 0
        self._shm_end = 0  # regions must start at or after this (append-only)
        self.importer = importer  # cuda_ipc.IpcImporter, or None: no CUDA IPC accepted
        self.ack: bytes | None = None  # what to answer the last message with, if anything
        self.ipc_error = ""  # why CUDA IPC did not work here (the worker fell back)
        self.routes = {"inline": 0, "shm": 0, "cuda_ipc": 0}  # bytes per route

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
            self.piped += len(chunk)
            if self.piped > self.max_bytes + MAX_HEADER:
                raise ProtocolError(f"worker sent more than {self.max_bytes} bytes")
            self._buf += chunk

    def pending(self, timeout: float) -> bool:
        """Whether a read may make progress now (bytes buffered or waiting, or the pipe
        closed), waiting at most `timeout` seconds for it."""
        if self._buf or self.closed:
            return True
        ready, _, _ = select.select([self.fd], [], [], max(0.0, timeout))
        return bool(ready)

    def _take(self, n: int) -> bytes:
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out

    def read(self, deadline: float) -> tuple[dict | None, list[torch.Tensor]]:
        """The next message: (header, tensors). Raises ChannelClosed/ChannelTimeout/ProtocolError.
        A timeout leaves a partly received message buffered for the next call. After it,
        `ack` is the byte to write to the worker (or None); (None, []) is a message the
        worker will send again through the host (CUDA IPC did not work here)."""
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
        raw = header.get("tensors", [])
        metas = [self._check_meta(m) for m in raw]
        inline = sum(m[2] for m, r in zip(metas, raw) if "shm" not in r and "cuda_ipc" not in r)
        total = sum(m[2] for m in metas)
        if self.total + total > self.max_bytes or inline > self.max_bytes:
            raise ProtocolError(f"worker sent more than {self.max_bytes} bytes")
        self._fill(7 + hlen + inline, deadline)
        self._take(7 + hlen)
        self.ack = None
        tensors: list = [None] * len(metas)
        ipc = []
        for k, ((shape, dtype, nbytes), r) in enumerate(zip(metas, raw)):
            if "cuda_ipc" in r:
                if self.importer is None or not isinstance(r["cuda_ipc"], dict) or nbytes == 0:
                    raise ProtocolError("unexpected CUDA IPC tensor on the result channel")
                ipc.append((k, {**r["cuda_ipc"], "nbytes": nbytes, "dtype": dtype, "shape": shape}))
            elif "shm" in r:
                tensors[k] = self._from_shm(r["shm"], shape, dtype, nbytes)
                self.routes["shm"] += nbytes
            else:
                data = self._take(nbytes)
                self.routes["inline"] += nbytes
                if nbytes == 0:
                    tensors[k] = torch.empty(shape, dtype=dtype)
                else:
                    tensors[k] = torch.frombuffer(bytearray(data), dtype=dtype).reshape(shape)
        self.total += total
        if ipc:
            from foundry.evaluate.cuda_ipc import IpcError, IpcViolation
            try:
                copies = self.importer.copy_out([it for _, it in ipc])
            except IpcViolation as e:
                raise ProtocolError(str(e)) from None
            except IpcError as e:  # not possible here: the worker resends through the host
                self.ipc_error = str(e)[:300]
                self.ack = b"n"
                self.total -= total
                return None, []
            for (k, _), t in zip(ipc, copies):
                tensors[k] = t
                self.routes["cuda_ipc"] += t.numel() * t.element_size()
            self.ack = b"a"
        return header, tensors

    def _from_shm(self, offset: Any, shape: list, dtype: torch.dtype, nbytes: int) -> torch.Tensor:
        if self.shm_fd < 0:
            raise ProtocolError("unexpected shared-memory tensor on the result channel")
        if type(offset) is not int or offset < self._shm_end or offset + nbytes > self.capacity:
            raise ProtocolError("shared-memory region out of order or out of bounds")
        buf = torch.empty(nbytes, dtype=torch.uint8)
        view = memoryview(buf.numpy())
        done = 0
        while done < nbytes:  # a copy of our own, taken now: later writes cannot change it
            n = os.preadv(self.shm_fd, [view[done:]], offset + done)
            if n <= 0:
                raise ProtocolError("shared-memory region shorter than declared")
            done += n
        self._shm_end = offset + nbytes
        _punch_hole(self.shm_fd, offset, nbytes)
        return buf.view(dtype).reshape(shape)

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


def _punch_hole(fd: int, offset: int, length: int) -> None:
    """Give a received region's pages back (the file keeps its size)."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
        libc.fallocate(fd, 0x02 | 0x01, offset, length)  # PUNCH_HOLE | KEEP_SIZE
    except (OSError, AttributeError):
        pass


def make_result_file(capacity: int) -> int:
    """A memfd of fixed size `capacity` (sparse: no memory until written) that can be
    neither shrunk nor grown, for one job's large outputs; -1 where unavailable."""
    try:
        import fcntl
        fd = os.memfd_create("foundry-results", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    except (AttributeError, OSError):
        return -1
    try:
        os.ftruncate(fd, capacity)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
    except (AttributeError, OSError):
        os.close(fd)
        return -1
    return fd
