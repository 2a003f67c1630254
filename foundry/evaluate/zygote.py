"""The warm worker: a process started once with a clean environment, that imports torch
(and the backends' helpers) ahead and forks one fresh child per job.

Forking from a pre-imported parent costs milliseconds, and every candidate starts from
the same untouched state: a candidate that patches torch or leaves threads behind dies
with its child, and cannot reach the next one. The warm worker never runs candidate
code and never computes a parallel torch op (OpenMP pools do not survive a fork).

Control messages (JSON, one per SOCK_SEQPACKET datagram, from the judge only):
  {"op": "fork", "tmpdir", "memory_mb", "fsize_mb", "isolate"} + fds [job_r, result_w, log_w,
      optionally the job's result file (a sealed memfd for large outputs)]
      ("isolate": enter foundry.evaluate.isolation before the job runs)
      -> {"pid"}
  {"op": "standby", "tmpdir", "memory_mb", "fsize_mb", "isolate", "device", "threads"} + fds
      [ctl]: a child set up as for "fork" (its device readied too) that waits on ctl
      for the job's fds (one datagram, any payload) -> {"pid"}
  {"op": "reap", "pid"} -> {"status": waitpid status, "orphans": n}   (after the judge
      killed the child's process group; also kills and reaps any orphaned descendants,
      this process being their subreaper, but not a standby child still waiting)
  {"op": "preload", "modules": [...]} -> {"ok": true, "failed": {...}}
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import resource
import signal
import socket
import sys

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, arg: int) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(option, arg, 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        pass


def _vm_bytes() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _preload(modules) -> dict:
    failed = {}
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as e:  # noqa: BLE001 - the child will report it properly
            failed[name] = f"{type(e).__name__}: {e}"[:300]
    return failed


def _setup(sock: socket.socket, req: dict) -> str:
    """The child's sandbox, before it gets its job's channels: its own process group,
    limits, temp dir, caches and (with "isolate") its namespaces. Returns "" or, where
    isolation failed, why (the job is then answered with that error)."""
    os.setpgid(0, 0)
    sock.close()
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # processes and threads: what the user runs now plus headroom (no fork bombs)
    nproc = sum(1 for e in os.listdir("/proc") if e.isdigit()) + int(req.get("nproc_headroom", 512))
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    fsize = int(req["fsize_mb"]) << 20
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    if req.get("address_cap", True):  # CUDA reserves far more address space than it uses
        cap = _vm_bytes() + (int(req["memory_mb"]) << 20)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    tmp = req["tmpdir"]
    os.chdir(tmp)
    for var in ("TMPDIR", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "XDG_CACHE_HOME"):
        os.environ[var] = tmp
    for var, path in (req.get("cache_env") or {}).items():  # persistent compiler caches, the judge's choice
        if var in ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR") and isinstance(path, str):
            os.environ[var] = path
    import tempfile
    tempfile.tempdir = tmp
    sys.dont_write_bytecode = True  # a candidate's process reads the warm worker's bytecode, writes none
    if req.get("isolate"):
        from foundry.evaluate.isolation import isolate
        from foundry.kernels import BUILD_CACHES, cache_dir
        try:
            isolate([tmp] + [str(cache_dir(kind)) for kind in BUILD_CACHES])
            os.chdir(tmp)  # re-enter through the writable bind mount
        except OSError as e:
            return f"could not isolate the worker: {e}"
    return ""


def _redirect(fds: list[int]) -> None:
    """The child's standard streams: no input, output and errors to the job's log."""
    log_fd = fds[2]
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(null)
    os.close(log_fd)


def _run(fds: list[int], failed: str) -> None:
    """The job: the harness on its channels, or, where the sandbox could not be set up,
    that error as the job's answer."""
    job_fd, result_fd = fds[:2]
    shm_fd = fds[3] if len(fds) > 3 else -1
    if failed:
        from foundry.evaluate import protocol
        protocol.send(result_fd, {"kind": "error", "stage": "sandbox", "error": failed})
        raise RuntimeError(failed)
    from foundry.evaluate import harness
    harness.main(job_fd, result_fd, shm_fd)


def _child(sock: socket.socket, req: dict, fds: list[int]) -> None:
    code = 70
    try:
        _redirect(fds)
        _run(fds, _setup(sock, req))
    except BaseException:  # noqa: BLE001
        import traceback
        traceback.print_exc()
    finally:
        os._exit(code)


def _standby(sock: socket.socket, req: dict, ctl_fd: int) -> None:
    """A child forked ahead of its job: its sandbox set up as for "fork", then its device
    readied (on a GPU, the CUDA context: about half a second), then it waits on `ctl_fd`
    for the job's channels (the "fork" request's fds, in one datagram). A closed `ctl_fd`
    ends it. Isolation comes before the device, as in a forked child, so every thread the
    device starts is already inside the sandbox."""
    code = 70
    try:
        failed = _setup(sock, req)
        if not failed:
            try:
                from foundry.evaluate.device import get_device
                get_device(str(req["device"])).prepare_worker(int(req["threads"]))
            except BaseException:  # noqa: BLE001 - the job's own setup fails again and says why
                pass
        ctl = socket.socket(fileno=ctl_fd)
        msg, fds, _, _ = socket.recv_fds(ctl, 1 << 16, 8)
        ctl.close()
        if msg and len(fds) >= 3:
            _redirect(fds)
            _run(fds, failed)
        code = 0
    except BaseException:  # noqa: BLE001
        import traceback
        traceback.print_exc()
    finally:
        os._exit(code)


def _orphans(me: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 1 and int(fields[1]) == me:
            found.append(int(entry))
    return found


def _reap(pid: int, *, keep: set[int]) -> tuple[int, int]:
    """Wait for the killed child `pid`, then kill and reap whatever it left behind: any
    other child of this process but those in `keep` (children waiting for a job)."""
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        status = -1
    n = 0
    for _ in range(3):  # orphaned descendants were reparented to us (subreaper)
        extra = [p for p in _orphans(os.getpid()) if p not in keep]
        if not extra:
            break
        for p in extra:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for p in extra:
            try:
                os.waitpid(p, 0)
                n += 1
            except ChildProcessError:
                pass
    return status, n


def main() -> None:
    sock = socket.socket(fileno=int(sys.argv[1]))
    modules = [m for m in sys.argv[2].split(",") if m] if len(sys.argv) > 2 else []
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # torch.use_deterministic_algorithms (memory poisoning) imports torch._inductor.config,
    # which takes seconds: pay that once here, not in every child
    failed = _preload(["torch", "torch._inductor.config", "torch.utils.deterministic",
                       "foundry.evaluate.harness", *modules])
    sock.send(json.dumps({"ready": True, "pid": os.getpid(), "failed": failed}).encode())
    waiting: set[int] = set()  # standby children, not yet reaped: no job's leftovers
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 1 << 16, 8)
        except OSError:
            break
        if not msg:
            break
        req = json.loads(msg)
        op = req.get("op")
        if op in ("fork", "standby"):
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                if op == "fork":
                    _child(sock, req, fds)
                _standby(sock, req, fds[0])
            for fd in fds:
                os.close(fd)
            try:
                os.setpgid(pid, pid)
            except OSError:
                pass
            if op == "standby":
                waiting.add(pid)
            sock.send(json.dumps({"pid": pid}).encode())
        elif op == "reap":
            waiting.discard(int(req["pid"]))
            status, n = _reap(int(req["pid"]), keep=waiting)
            sock.send(json.dumps({"status": status, "orphans": n}).encode())
        elif op == "preload":
            sock.send(json.dumps({"ok": True, "failed": _preload(req.get("modules", []))}).encode())
        else:
            sock.send(json.dumps({"error": f"unknown op {op!r}"}).encode())
    os._exit(0)


if __name__ == "__main__":
    main()
