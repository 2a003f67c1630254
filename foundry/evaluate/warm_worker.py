"""The warm worker's handle on the judge's side: one pre-imported process
(foundry.evaluate.zygote) that forks a child per job.

No torch here: a caller can start the warm worker before it imports torch itself, so
the two imports overlap (the CLI does). `warm_worker_for(config, backends=...)` is the
worker an Evaluator of that config builds; pass it to `Evaluator(worker=...)`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Sequence

from foundry.evaluate.backends import get_backend
from foundry.evaluate.config import EvalConfig
from foundry.evaluate.secrets import clean_env
from foundry.evaluate.worker_env import worker_env

READY_TIMEOUT_S = 120.0
CTL_TIMEOUT_S = 30.0
BASE_PRELOAD = ("foundry.kernels", "foundry.kernels.c")


class SandboxError(RuntimeError):
    """The warm worker could not be started or stopped answering."""


@dataclass(frozen=True)
class Standby:
    """A child forked ahead of its job (the zygote's "standby" op): its sandbox set up
    with `setup` (the fork request, tmpdir included) and its device readied; it runs the
    job whose channels are sent on `ctl`."""

    pid: int
    ctl: socket.socket
    setup: dict

    def matches(self, setup: dict) -> bool:
        """Whether a job that needs `setup` may run here (its own tmpdir and host-memory
        figure aside: a standby child is kept only where no address cap applies)."""
        ignore = ("tmpdir", "memory_mb")
        return ({k: v for k, v in self.setup.items() if k not in ignore}
                == {k: v for k, v in setup.items() if k not in ignore})


class WarmWorker:
    """One warm pre-imported process that forks a child per job, and keeps at most one
    child forked ahead (`prepare_standby`, `take_standby`)."""

    def __init__(self, *, env: dict, preload: tuple = ()):
        self.env = env
        self.preload = tuple(dict.fromkeys(preload))
        self.proc: subprocess.Popen | None = None
        self.sock: socket.socket | None = None
        self.start_s = 0.0
        self._pending = False  # launched, its "ready" not read yet
        self._launched_at = 0.0
        self.standby: Standby | None = None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        self.launch()
        self._await_ready()

    def launch(self) -> None:
        """Start the warm worker's process without waiting for its imports (it says it is
        ready on the first request); a no-op while one is alive."""
        if self.alive():
            return
        self.close()
        self._launched_at = time.monotonic()
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        cmd = [sys.executable, "-c", "from foundry.evaluate.zygote import main; main()",
               str(theirs.fileno()), ",".join(self.preload)]
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(cmd, env=self.env, pass_fds=(theirs.fileno(),),
                                     start_new_session=True, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=self._stderr,
                                     cwd=tempfile.gettempdir())
        theirs.close()
        self.sock = mine
        self._pending = True

    def _await_ready(self) -> None:
        if not self._pending:
            return
        self._pending = False
        try:
            reply = self._recv(READY_TIMEOUT_S)
        except SandboxError as e:
            self._stderr.seek(0)
            tail = self._stderr.read()[-2000:].decode(errors="replace")
            raise SandboxError(f"{e}; its stderr: {tail}") from None
        if not reply.get("ready"):
            raise SandboxError(f"warm worker did not start: {reply}")
        self.start_s = time.monotonic() - self._launched_at

    def _recv(self, timeout: float) -> dict:
        assert self.sock is not None
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(1 << 16)
        except (OSError, socket.timeout) as e:
            self.close()
            raise SandboxError(f"warm worker stopped answering ({e})") from None
        if not data:
            self.close()
            raise SandboxError("warm worker exited")
        return json.loads(data)

    def request(self, req: dict, fds: list[int] = ()) -> dict:
        if not self.alive():
            self.close()
            self.start()
        self._await_ready()
        assert self.sock is not None
        try:
            socket.send_fds(self.sock, [json.dumps(req).encode()], list(fds))
        except OSError as e:
            self.close()
            raise SandboxError(f"warm worker unreachable ({e})") from None
        return self._recv(CTL_TIMEOUT_S)

    def prepare_standby(self, setup: dict) -> Standby | None:
        """Fork a child ahead of the next job with `setup` (a "fork" request with its own
        tmpdir, plus "device" and "threads"); None where one is already waiting or the
        warm worker could not fork. The caller removes `setup["tmpdir"]` when it gets None."""
        if self.standby is not None:
            return None
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            reply = self.request({"op": "standby", **setup}, [theirs.fileno()])
            self.standby = Standby(int(reply["pid"]), mine, dict(setup))
        except (SandboxError, KeyError, ValueError):
            mine.close()
            return None
        finally:
            theirs.close()
        return self.standby

    def take_standby(self, setup: dict) -> Standby | None:
        """The child forked ahead, where it matches `setup` (else None, and a child that
        does not match stays for the caller to `discard_standby`)."""
        if self.standby is None or not self.standby.matches(setup):
            return None
        taken, self.standby = self.standby, None
        return taken

    def discard_standby(self) -> int | None:
        """End the child forked ahead, if any (killed, reaped, its tmpdir removed); its pid."""
        if self.standby is None:
            return None
        gone, self.standby = self.standby, None
        gone.ctl.close()
        try:
            os.killpg(gone.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.alive():
            try:
                self.request({"op": "reap", "pid": gone.pid})
            except SandboxError:
                pass
        shutil.rmtree(gone.setup.get("tmpdir", ""), ignore_errors=True)
        return gone.pid

    def ensure_preloaded(self, modules: tuple) -> None:
        new = [m for m in modules if m not in self.preload]
        if not new:
            return
        self.preload = self.preload + tuple(new)
        if self.alive():
            self.request({"op": "preload", "modules": new})

    def close(self) -> None:
        self.discard_standby()
        self._pending = False
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
            self.sock = None
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            self.proc = None


def importable_path(pythonpath: str) -> str:
    """`pythonpath` with the folder this `foundry` package was imported from first, so the
    warm worker imports the judge's own code even when that folder is on the judge's
    sys.path only (a script run from a checkout, a notebook) and not on its PYTHONPATH."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # holds foundry/
    if os.path.basename(root) in ("site-packages", "dist-packages"):  # installed: importable anyway
        return pythonpath
    rest = [p for p in pythonpath.split(os.pathsep) if p and os.path.abspath(p) != root]
    return os.pathsep.join([root, *rest])


def warm_worker_for(config: EvalConfig, *, backends: Sequence[str] = ()) -> WarmWorker:
    """The warm worker (not started) for an Evaluator of `config` whose candidates use
    `backends`: a clean environment (no secrets) with the device's settings, and the
    backends' modules to import before forking."""
    env = clean_env(os.environ, config.secret_env_names)
    env.update(worker_env(config.device, threads=config.threads, tf32=config.tf32))
    env["PYTHONPATH"] = importable_path(env.get("PYTHONPATH", ""))
    preload = list(BASE_PRELOAD)
    for name in backends:
        preload += [m for m in get_backend(name).preload if m not in preload]
    return WarmWorker(env=env, preload=tuple(preload))
