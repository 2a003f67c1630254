"""The `cuda_inline` backend: KernelBench's `torch.utils.cpp_extension.load_inline` path.

KernelBench solutions call `load_inline(...)` themselves at import time, so they run
unchanged: what this module adds is where and when they build.

- Build directories keyed by content hash: `install_build_hook()` (run in the worker
  before the candidate file executes) wraps `load_inline` and `load` so each call builds
  in `cache_dir("cuda_inline")/<hash of its arguments, torch, CUDA, target archs>`,
  whatever `build_directory` the file asked for. A second evaluation of the same code
  (another trial, a restarted worker, a candidate that differs elsewhere) only loads the
  built library, and two different builds never share or clobber a directory.
  `prepare_worker_env(source=...)` also points TORCH_EXTENSIONS_DIR at a per-candidate
  directory for anything built by other means.
- Stale locks: torch guards a build with a `lock` file and waits forever while it
  exists; a builder killed mid-build leaves it behind. A lock whose recorded owner
  process is gone, or that is older than `stale_after_s`, is removed before building.
- `BuildPool` prebuilds candidates in parallel in subprocesses (own process group, no
  GPU visible, a scrubbed environment, a deadline), so the evaluator compiles on the CPU
  cores while its GPU times something else. A build that runs past its deadline is killed
  with its whole process group and its build directory is removed.
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from foundry.kernels import cache_dir

BUILT_MARK = ".foundry-built"
OWNER_FILE = ".foundry-owner"
NOTHING_BUILT = 3  # prebuild exit code: the file calls no load_inline at import time
_ENV_KEEP = ("PATH", "HOME", "LANG", "LC_ALL", "CUDA_HOME", "CUDA_PATH", "CC", "CXX",
             "PYTHONPATH", "LD_LIBRARY_PATH", "FOUNDRY_CACHE_DIR", "TORCH_CUDA_ARCH_LIST",
             "NVCC_APPEND_FLAGS", "NVCC_PREPEND_FLAGS")
_LOAD_INLINE_RE = re.compile(r"\bload_inline\s*\(")


def uses_load_inline(source: str) -> bool:
    """Does this candidate file build an extension with `load_inline`?"""
    return bool(_LOAD_INLINE_RE.search(source))


def arch_list() -> str:
    """TORCH_CUDA_ARCH_LIST to build for: the environment's, else the current device's."""
    env = os.environ.get("TORCH_CUDA_ARCH_LIST")
    if env:
        return env
    import torch
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        return f"{major}.{minor}"
    return ""


def build_key(*, source: str, params: Mapping | None = None, archs: str | None = None) -> str:
    import torch
    parts = [source, json.dumps(dict(params or {}), sort_keys=True, default=str),
             torch.__version__, str(torch.version.cuda), archs if archs is not None else arch_list(),
             f"{sys.version_info.major}.{sys.version_info.minor}"]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:20]


def extensions_dir(*, source: str, params: Mapping | None = None, archs: str | None = None) -> Path:
    """The per-candidate TORCH_EXTENSIONS_DIR (created)."""
    path = cache_dir("cuda_inline") / build_key(source=source, params=params, archs=archs)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clear_stale_locks(directory: Path, *, stale_after_s: float = 900.0) -> list[Path]:
    """Remove torch build locks under `directory` whose builder is gone. Returns them."""
    removed = []
    owner_pid = None
    owner = directory / OWNER_FILE
    try:
        owner_pid = int(json.loads(owner.read_text())["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        owner_pid = None
    for lock in directory.glob("*/lock"):
        try:
            age = time.time() - lock.stat().st_mtime
        except OSError:
            continue
        dead_owner = owner_pid is not None and owner_pid != os.getpid() and not _pid_alive(owner_pid)
        if dead_owner or age > stale_after_s:
            try:
                lock.unlink()
                removed.append(lock)
            except OSError:
                pass
    return removed


_hook_state: dict = {"installed": False, "dirs": []}
PROGRESS_ENV = "FOUNDRY_INLINE_PROGRESS"  # file the prebuild appends build dirs to


def _call_key(kind: str, arguments: Mapping) -> str:
    import torch
    args = {k: v for k, v in arguments.items() if k not in ("build_directory", "verbose")}
    if kind == "load":  # sources are file paths: hash their contents
        srcs = args.get("sources")
        srcs = [srcs] if isinstance(srcs, str) else list(srcs or ())
        args["sources"] = [Path(p).read_text(errors="replace") if os.path.exists(p) else p
                           for p in srcs]
    text = json.dumps(args, sort_keys=True, default=str)
    parts = [kind, text, torch.__version__, str(torch.version.cuda), arch_list(),
             f"{sys.version_info.major}.{sys.version_info.minor}"]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:20]


def build_dir_for_call(kind: str, arguments: Mapping) -> Path:
    path = cache_dir("cuda_inline") / "ext" / _call_key(kind, arguments)
    path.mkdir(parents=True, exist_ok=True)
    return path


def install_build_hook() -> None:
    """Make `load_inline` / `load` build in content-hashed, lock-checked directories.

    Idempotent. Call before the candidate file executes (it imports the wrapped names).
    """
    if _hook_state["installed"]:
        return
    import inspect

    import torch.utils.cpp_extension as ext
    archs = arch_list()
    if archs:
        os.environ["TORCH_CUDA_ARCH_LIST"] = archs
    for kind in ("load_inline", "load"):
        real = getattr(ext, kind)
        sig = inspect.signature(real)

        def wrapper(*args, _real=real, _sig=sig, _kind=kind, **kwargs):
            bound = _sig.bind(*args, **kwargs)
            directory = build_dir_for_call(_kind, bound.arguments)
            clear_stale_locks(directory)
            _claim(directory)
            progress = os.environ.get(PROGRESS_ENV)
            if progress:
                with open(progress, "a") as f:
                    f.write(str(directory) + "\n")
            bound.arguments["build_directory"] = str(directory)
            module = _real(*bound.args, **bound.kwargs)
            (directory / BUILT_MARK).write_text(json.dumps({"name": bound.arguments.get("name")}))
            _hook_state["dirs"].append(str(directory))
            return module

        wrapper.__name__ = kind
        wrapper.__doc__ = real.__doc__
        wrapper.__wrapped__ = real
        setattr(ext, kind, wrapper)
    _hook_state["installed"] = True


def _claim(directory: Path) -> None:
    (directory / OWNER_FILE).write_text(json.dumps({"pid": os.getpid(), "t": time.time()}))


def prepare_worker_env(*, source: str, params: Mapping | None = None,
                       stale_after_s: float = 900.0) -> Path:
    """Point this process's load_inline builds at the candidate's own cached directory.

    Call in the worker before executing the candidate file. Sets TORCH_EXTENSIONS_DIR
    (and TORCH_CUDA_ARCH_LIST to the device's when unset, so the build targets it only).
    """
    archs = arch_list()
    if archs:
        os.environ["TORCH_CUDA_ARCH_LIST"] = archs
    directory = extensions_dir(source=source, params=params, archs=archs)
    clear_stale_locks(directory, stale_after_s=stale_after_s)
    _claim(directory)
    os.environ["TORCH_EXTENSIONS_DIR"] = str(directory)
    install_build_hook()
    return directory


def is_built(directory: Path) -> bool:
    return (directory / BUILT_MARK).exists()


@dataclass(frozen=True)
class BuildOutcome:
    """One prebuild: ok, where, how long, and the tail of its log."""

    ok: bool
    directory: str
    seconds: float
    cached: bool = False
    timed_out: bool = False
    log: str = ""


def _scrubbed_env(directory: Path, archs: str, jobs: int) -> dict:
    env = {k: os.environ[k] for k in _ENV_KEEP if k in os.environ}
    env.update(TORCH_EXTENSIONS_DIR=str(directory), CUDA_VISIBLE_DEVICES="",
               MAX_JOBS=str(max(1, jobs)), PYTHONUNBUFFERED="1")
    if archs:
        env["TORCH_CUDA_ARCH_LIST"] = archs
    return env


def build_now(*, source: str, params: Mapping | None = None, timeout_s: float = 600.0,
              jobs: int | None = None, archs: str | None = None) -> BuildOutcome:
    """Prebuild one candidate's load_inline extensions in a subprocess (blocking)."""
    archs = archs if archs is not None else arch_list()
    directory = extensions_dir(source=source, params=params, archs=archs)
    if is_built(directory):
        return BuildOutcome(True, str(directory), 0.0, cached=True)
    clear_stale_locks(directory)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="foundry-inline-") as tmp:
        cand = Path(tmp) / "candidate.py"
        cand.write_text(source)
        (Path(tmp) / "params.json").write_text(json.dumps(dict(params or {}), default=str))
        progress = Path(tmp) / "progress.txt"
        env = _scrubbed_env(directory, archs, jobs or os.cpu_count() or 1)
        env.update(TMPDIR=tmp, **{PROGRESS_ENV: str(progress)})
        proc = subprocess.Popen([sys.executable, "-m", "foundry.kernels.cuda_inline", str(cand)],
                                cwd=tmp, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
        (directory / OWNER_FILE).write_text(json.dumps({"pid": proc.pid, "t": time.time()}))
        try:
            out, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            started = progress.read_text().split() if progress.exists() else []
            for d in [*started, str(directory)]:
                if not (Path(d) / BUILT_MARK).exists() or d == str(directory):
                    shutil.rmtree(d, ignore_errors=True)
            return BuildOutcome(False, str(directory), time.perf_counter() - t0,
                                timed_out=True, log=f"build timed out after {timeout_s:.0f} s")
    log = out.decode(errors="replace")[-4000:]
    if proc.returncode == NOTHING_BUILT:  # builds in the worker, at construction
        return BuildOutcome(True, str(directory), time.perf_counter() - t0, log=log)
    ok = proc.returncode == 0
    if ok:
        (directory / BUILT_MARK).write_text(json.dumps({"seconds": time.perf_counter() - t0}))
    return BuildOutcome(ok, str(directory), time.perf_counter() - t0, log=log)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()


class BuildPool:
    """Prebuilds load_inline candidates in parallel on the CPU cores.

    `submit` returns a Future[BuildOutcome]; builds of the same content hash share one
    future. Each build gets `cores // max_parallel` compiler jobs.
    """

    def __init__(self, *, max_parallel: int = 2, timeout_s: float = 600.0,
                 cores: int | None = None):
        if max_parallel < 1:
            raise ValueError(f"max_parallel must be >= 1, got {max_parallel}")
        self.timeout_s = timeout_s
        self._jobs = max(1, (cores or os.cpu_count() or 1) // max_parallel)
        self._pool = cf.ThreadPoolExecutor(max_workers=max_parallel,
                                           thread_name_prefix="foundry-inline-build")
        self._futures: dict[str, cf.Future] = {}

    def submit(self, *, source: str, params: Mapping | None = None) -> cf.Future:
        archs = arch_list()
        key = build_key(source=source, params=params, archs=archs)
        fut = self._futures.get(key)
        if fut is None or (fut.done() and not fut.result().ok):
            fut = self._pool.submit(build_now, source=source, params=params,
                                    timeout_s=self.timeout_s, jobs=self._jobs, archs=archs)
            self._futures[key] = fut
        return fut

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def _prebuild_main(path: str) -> int:
    """Subprocess entry: execute the candidate file so its load_inline calls build."""
    install_build_hook()
    built = _hook_state["dirs"]
    src = Path(path).read_text()
    params = json.loads((Path(path).parent / "params.json").read_text())
    glb = {"__name__": "foundry_prebuild", "__file__": path, "PARAMS": params}
    try:
        exec(compile(src, path, "exec"), glb)  # noqa: S102 - builds the candidate's extensions
    except Exception as e:  # noqa: BLE001 - top-level GPU use fails here (no GPU visible)
        if not built:
            print(f"prebuild failed: {type(e).__name__}: {e}", file=sys.stderr)
            return 1
        print(f"note: built {built}; the rest of the file failed without a GPU: {e}")
    if not built:
        print("nothing to prebuild: no load_inline call ran at import time")
        return NOTHING_BUILT
    print(f"built: {built}")
    return 0


if __name__ == "__main__":
    sys.exit(_prebuild_main(sys.argv[1]))
