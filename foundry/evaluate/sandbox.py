"""The judge's side of the sandbox: a warm worker (foundry.evaluate.warm_worker) per
Evaluator, one forked child per job, deadlines, memory watch, idle probes, cleanup.

Each child runs in its own process group with a stripped environment, its own temp dir,
an address-space cap (plus a resident-memory watch here), a file-size cap and a hard
deadline; when the job ends, however it ends, the whole group is killed and orphans are
reaped by the warm worker. If the warm worker itself dies, the next job starts a new one.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import socket
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable

from foundry.evaluate import protocol
from foundry.evaluate.device_gate import DeviceGate
from foundry.evaluate.job import Job
from foundry.evaluate.warm_worker import SandboxError, WarmWorker

@dataclass
class Message:
    header: dict
    tensors: list
    at: float  # the judge's monotonic clock when it arrived


@dataclass
class JobOutcome:
    messages: list = field(default_factory=list)
    status: int | None = None  # waitpid status of the child
    timed_out: bool = False
    memory_exceeded: bool = False
    protocol_error: str = ""
    log: str = ""
    probes: list = field(default_factory=list)  # one dict per idle probe
    wall_s: float = 0.0
    started_at: float = 0.0  # the judge's monotonic clock when the fork was asked for
    memory_cap_mb: float = 0.0  # the host-memory cap the worker ran under
    peak_rss_mb: float = 0.0  # the largest resident size the watch saw
    transfer: dict = field(default_factory=dict)  # bytes per route, and why CUDA IPC fell back
    device_wait_s: float = 0.0  # the child waited this long for the device to itself (lanes)
    stopped_s: float = 0.0  # the child was stopped this long for other lanes' timed sections
    forked_ahead: bool = False  # the job ran in a child forked before it came (standby)

    def drop_tensors(self, kinds: tuple[str, ...] | None = None) -> None:
        """Let go of every received tensor (once the outputs are judged), or only those of
        messages of `kinds`."""
        for m in self.messages:
            if kinds is None or m.header.get("kind") in kinds:
                m.tensors = []

    def of_kind(self, kind: str) -> list[Message]:
        return [m for m in self.messages if m.header.get("kind") == kind]

    def exit_text(self) -> str:
        if self.timed_out:
            return "timed out (the worker's process group was killed)"
        if self.memory_exceeded:
            return (f"exceeded the host-memory cap of {self.memory_cap_mb:.0f} MB (resident "
                    f"{self.peak_rss_mb:.0f} MB; the worker was killed; the cap is "
                    f"EvalConfig.memory_mb, raised for large tasks)")
        st = self.status
        if st is None or st < 0:
            return "worker ended"
        if os.WIFSIGNALED(st):
            sig = os.WTERMSIG(st)
            try:
                name = signal.Signals(sig).name
            except ValueError:
                name = str(sig)
            return f"worker killed by signal {sig} ({name})"
        if os.WIFEXITED(st):
            return f"worker exited with code {os.WEXITSTATUS(st)}"
        return "worker ended"


def _cpu_ns(pid: int) -> int:
    """CPU time used so far by all threads of `pid` (schedstat, nanoseconds)."""
    total = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _descendants(pid: int) -> list[int]:
    """Processes other than `pid` in its process group or whose parent it is."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == pid:
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[-1].split()
        except OSError:
            continue
        if len(fields) > 2 and fields[0] != "Z" and (int(fields[1]) == pid or int(fields[2]) == pid):
            found.append(int(entry))
    return found


def run_job(worker: WarmWorker, job: Job, *, deadline_s: float, memory_mb: int,
            idle_probe_ms: float, max_bytes: int, address_cap: bool = True, isolate: bool = False,
            on_idle: Callable[[JobOutcome], bytes] = lambda o: b"g", shared_results: bool = True,
            importer=None, on_message: Callable[[Message], None] | None = None,
            cache_env: dict | None = None, gate: DeviceGate | None = None,
            timed_idles: bool = False, standby: bool = False) -> JobOutcome:
    """Fork a child for `job`, collect its messages until it is done, dies or runs out of
    time, then kill its process group. `on_idle` answers each idle message with the byte
    the child waits for ("g": go on, "s": stop). With `shared_results`, large outputs come
    through a sealed memfd of `max_bytes` (protocol.make_result_file); with an `importer`
    (cuda_ipc.IpcImporter), CUDA outputs come device-to-device, copied on arrival.
    `on_message` sees each message as it arrives (and may drop its tensors). `cache_env`:
    TRITON_CACHE_DIR / TORCHINDUCTOR_CACHE_DIR for the child (else its own temp dir).

    `gate` (shared by the lanes of one device, see device_gate.py): the child is known to
    it before it gets its job; the copy of CUDA outputs and `on_message` run as shared
    device work; with `timed_idles`, the
    child's idle messages alternate between "about to time" (the go comes with the device
    held alone) and "timed" (the device is let go). Time the child spent stopped for
    another lane, or waiting for the device, extends its deadline.

    With `standby` (no address cap: a GPU's jobs), the job runs in the child the warm
    worker forked ahead with the same sandbox settings, whose device is ready (a CUDA
    context takes about half a second to create), and when the job is over the next such
    child is forked; it waits stopped like any worker during other lanes' timed sections."""
    gate = gate if gate is not None else DeviceGate()
    t0 = time.monotonic()
    out = JobOutcome(memory_cap_mb=float(memory_mb), started_at=t0)
    setup = {"memory_mb": memory_mb, "fsize_mb": 256, "address_cap": address_cap, "isolate": isolate,
             "cache_env": dict(cache_env or {}), "device": job.device, "threads": job.threads}
    standby = standby and not address_cap
    ready = worker.take_standby(setup) if standby else None
    if standby and ready is None and worker.standby is not None:  # one forked for other settings
        gate.unregister(worker.discard_standby())
    tmp = ready.setup["tmpdir"] if ready is not None else tempfile.mkdtemp(prefix="foundry-w-")
    log_path = os.path.join(tmp, "worker.log")
    job_r, job_w = os.pipe()
    res_r, res_w = os.pipe()
    log_w = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    shm_fd = protocol.make_result_file(max_bytes) if shared_results else -1
    reader_ref: list = []
    pid = None
    holding = False  # this job's timed section has the device
    try:
        fds = [job_r, res_w, log_w] + ([shm_fd] if shm_fd >= 0 else [])
        if ready is not None and _hand_over(ready, fds):
            pid = ready.pid
            gate.adopt(pid)  # registered when forked; this lane's from now on
            out.forked_ahead = True
        else:
            if ready is not None:  # it had died: a plain fork, in the same tmpdir
                gate.unregister(ready.pid)
                _reap_quietly(worker, ready.pid)
            fork = {"op": "fork", "tmpdir": tmp, **{k: v for k, v in setup.items() if k not in ("device", "threads")}}
            try:
                reply = worker.request(fork, fds)
            except SandboxError:  # the warm worker had died: one retry on a fresh one
                reply = worker.request(fork, fds)
            pid = int(reply["pid"])
            gate.register(pid)  # before its job is written: nothing of the job has run yet
        for fd in (job_r, res_w, log_w):
            os.close(fd)
        job_r = res_w = log_w = -1
        try:
            protocol.write_job(job_w, dataclasses.replace(job, cuda_ipc=importer is not None))
        except OSError:
            pass  # the child died before reading its job; its status says why
        reader = protocol.Reader(res_r, max_bytes=max_bytes, shm_fd=shm_fd, importer=importer)
        reader_ref.append(reader)
        deadline = t0 + deadline_s
        waited = 0.0  # seconds the child waited for the device (not its own time)
        while True:
            now = time.monotonic()
            if now >= deadline + waited + gate.frozen_s(pid):
                out.timed_out = True
                break
            rss = _rss_mb(pid)
            out.peak_rss_mb = max(out.peak_rss_mb, rss)
            if rss > memory_mb:
                out.memory_exceeded = True
                break
            if not reader.pending(0.1):  # waited for outside the gate
                continue
            with gate.shared():
                try:
                    header, tensors = reader.read(time.monotonic() + 0.1)
                except protocol.ChannelTimeout:
                    continue
                except protocol.ChannelClosed:
                    break
                except protocol.ProtocolError as e:
                    out.protocol_error = str(e)
                    break
                if reader.ack is not None:  # a CUDA output was copied (or could not be): answer
                    try:
                        os.write(job_w, reader.ack)
                    except OSError:
                        break
                if header is None:  # sent again through the host
                    continue
                msg = Message(header, tensors, time.monotonic())
                out.messages.append(msg)
                if on_message is not None:
                    on_message(msg)
                kind = header.get("kind")
                if kind == "idle":  # probed with no other lane's timed section under way
                    out.probes.append(_probe(pid, idle_probe_ms))
            if kind == "idle":
                answer = on_idle(out)
                if holding:
                    gate.release_exclusive()
                    holding = False
                elif timed_idles and answer == b"g":
                    waited += gate.acquire_exclusive()
                    out.device_wait_s = waited
                    holding = True
                try:
                    os.write(job_w, answer)
                except OSError:
                    break
            elif kind in ("done", "error"):
                break
    finally:
        if holding:
            gate.release_exclusive()
        if pid is not None:
            try:
                os.killpg(pid, signal.SIGKILL)  # a stopped group is killed too
            except (ProcessLookupError, PermissionError):
                pass
            out.stopped_s = gate.unregister(pid)
            try:
                reply = worker.request({"op": "reap", "pid": pid})
                out.status = reply.get("status")
            except SandboxError:
                out.status = None
        for fd in (job_r, job_w, res_r, res_w, log_w):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        if shm_fd >= 0:
            os.close(shm_fd)
        if reader_ref:
            r = reader_ref[0]
            out.transfer = {**r.routes, **({"cuda_ipc_error": r.ipc_error} if r.ipc_error else {})}
        out.log = _tail(log_path, 8000)
        shutil.rmtree(tmp, ignore_errors=True)
        out.wall_s = time.monotonic() - t0
        if standby:
            _fork_ahead(worker, setup, gate)
    return out


def _hand_over(ready, fds: list[int]) -> bool:
    """Send the job's channels to the child forked ahead; False where it is gone."""
    try:
        socket.send_fds(ready.ctl, [b"go"], fds)
        return True
    except OSError:
        return False
    finally:
        ready.ctl.close()


def _reap_quietly(worker: WarmWorker, pid: int) -> None:
    try:
        worker.request({"op": "reap", "pid": pid})
    except SandboxError:
        pass


def _fork_ahead(worker: WarmWorker, setup: dict, gate: DeviceGate) -> None:
    """The next job's child, forked now with `setup` and known to the gate (stopped during
    any lane's timed section until a lane adopts it)."""
    tmp = tempfile.mkdtemp(prefix="foundry-w-")
    try:
        ready = worker.prepare_standby({**setup, "tmpdir": tmp})
    except Exception:  # noqa: BLE001 - the next job forks its own child
        ready = None
    if ready is None:
        shutil.rmtree(tmp, ignore_errors=True)
        return
    gate.register(ready.pid, standby=True)


def _probe(pid: int, window_ms: float) -> dict:
    """Is the child doing work while it says it is idle? CPU time over a short window,
    and any process it started."""
    c0 = _cpu_ns(pid)
    time.sleep(window_ms / 1000)
    busy_ms = (_cpu_ns(pid) - c0) / 1e6
    return {"busy_ms": busy_ms, "window_ms": window_ms, "descendants": len(_descendants(pid))}


def _tail(path: str, limit: int) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - limit))
            return f.read().decode(errors="replace")
    except OSError:
        return ""
