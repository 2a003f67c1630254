"""Compiler seeds for a run: each made once per (task, sizes, device, threads, torch
version), in a fresh process, and kept on disk.

A seed is made by compiling the task's reference with torch.compile; that runs in a
fresh Python process (`python -m foundry.seeds.store JOB ANSWER`, so nothing of
Inductor, dynamo or their caches stays in the caller, which may be the judge's actor)
under a time limit. A seed that was made is kept under `<cache root>/seeds/`, keyed by
the task and its sizes, the device and its hardware, the thread count and the torch
version, so a second run of the same task does not compile it again.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from foundry.paths import cache_root
from foundry.seeds.result import Seed, no_seed
from foundry.types import Task, content_hash

# bump when what a seed holds changes: older entries are then made again (3: the embedded
# reference without the task's forwards and their helpers)
STORE_VERSION = "3"
POLL_S = 0.5


def hardware_key(device: str) -> str:
    """What a seed's kernels were made for besides the task: the CPU's vector ISA, or the
    GPU's name and compute capability (a cache shared between machines keeps them apart)."""
    import platform

    import torch
    if device == "cuda":
        try:
            major, minor = torch.cuda.get_device_capability()
            return f"{torch.cuda.get_device_name()}:sm_{major}{minor}"
        except Exception:  # noqa: BLE001 - no GPU visible here: the key says so
            return "cuda:unknown"
    get_isa = getattr(getattr(torch.backends, "cpu", None), "get_cpu_capability", None)
    return f"{platform.machine()}:{get_isa() if get_isa else 'unknown'}"


def seed_key(task: Task, *, device: str, threads: int) -> str:
    import torch
    return content_hash(task.source_hash, device, hardware_key(device), str(threads), torch.__version__,
                        STORE_VERSION)


def _die_with_parent(parent: int) -> None:  # the child, first thing
    """End this process once `parent` is gone (it is then adopted by another process), so
    a compile never outlives the evaluator that asked for it."""
    import threading

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)
    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def make_in_fresh_process(task: Task, *, device: str, threads: int = 1, timeout_s: float = 300.0,
                          on_start: Callable[[int], None] = lambda pid: None,
                          on_end: Callable[[int], float] = lambda pid: 0.0,
                          stopped_s: Callable[[int], float] = lambda pid: 0.0) -> Seed:
    """`inductor_seed(task)` made in a fresh Python process (its own process group, killed
    with its parent). A process that dies or runs past `timeout_s` (not counting the time
    it was stopped, `stopped_s(pid)`) gives a Seed without source whose note says so.
    `on_start(pid)` / `on_end(pid)`: the process began / is gone (a device gate registers
    it, so that other lanes' timed sections stop it)."""
    with tempfile.TemporaryDirectory(prefix="foundry-seed-") as tmp:
        job, answer, log = Path(tmp) / "job.pkl", Path(tmp) / "seed.json", Path(tmp) / "stderr.txt"
        job.write_bytes(pickle.dumps((task, device, int(threads))))
        # one compile thread: Inductor starts no pool of its own that could outlive a kill
        env = {**os.environ, "TORCHINDUCTOR_COMPILE_THREADS": "1"}
        with open(log, "wb") as err:
            proc = subprocess.Popen([sys.executable, "-m", "foundry.seeds.store", str(job), str(answer),
                                     str(os.getpid())], env=env, stdout=subprocess.DEVNULL, stderr=err,
                                    start_new_session=True)
        on_start(proc.pid)
        deadline = time.monotonic() + timeout_s
        try:
            while proc.poll() is None:
                if time.monotonic() > deadline + stopped_s(proc.pid):
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    return no_seed(task.task_id, device, f"seed generation ran past its {timeout_s:g} s limit")
                time.sleep(min(POLL_S, timeout_s / 4))
        finally:
            on_end(proc.pid)
        try:
            return Seed(**json.loads(answer.read_text()))
        except (OSError, ValueError, TypeError):
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] or [""]
            return no_seed(task.task_id, device, f"seed generation ended without an answer (exit code "
                                                 f"{proc.returncode}: {tail[0][:200]})")


def _main(job: str, answer: str, parent: str) -> None:  # the fresh process
    _die_with_parent(int(parent))
    task, device, threads = pickle.loads(Path(job).read_bytes())
    try:
        from foundry.seeds.seed import inductor_seed
        seed = inductor_seed(task, device=device, threads=threads)
    except Exception as e:  # noqa: BLE001 - any failure is the seed's note
        from foundry.evaluate.device_memory import out_of_memory
        seed = no_seed(task.task_id, device, f"seed generation failed: {type(e).__name__}: {e}"[:500],
                       out_of_memory=out_of_memory(e))
    Path(answer).write_text(json.dumps(dataclasses.asdict(seed)))


class SeedStore:
    """Seeds on disk, one JSON file per key; `get` makes a missing one (fresh process)."""

    def __init__(self, root: str | Path | None = None, *, timeout_s: float = 300.0):
        self.root = Path(root) if root is not None else cache_root() / "seeds"
        self.timeout_s = float(timeout_s)

    def path(self, key: str) -> Path:
        return self.root / f"{key}.json"

    def cached(self, task: Task, *, device: str, threads: int = 1) -> Seed | None:
        p = self.path(seed_key(task, device=device, threads=threads))
        try:
            return Seed(**json.loads(p.read_text()))
        except (OSError, ValueError, TypeError):
            return None

    def get(self, task: Task, *, device: str, threads: int = 1, **process: Any) -> tuple[Seed, bool]:
        """(the seed of `task`, whether it came from the disk). Only a seed that was made
        is kept: a task without one is tried again by the next run (the reason may have
        been passing, e.g. the device's memory taken by other work). `process`: the
        callbacks of `make_in_fresh_process`."""
        hit = self.cached(task, device=device, threads=threads)
        if hit is not None:
            return hit, True
        seed = make_in_fresh_process(task, device=device, threads=threads, timeout_s=self.timeout_s, **process)
        if seed.ok:
            self._put(seed_key(task, device=device, threads=threads), seed)
        return seed, False

    def _put(self, key: str, seed: Seed) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.root, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(dataclasses.asdict(seed), f)
        os.replace(tmp, self.path(key))


if __name__ == "__main__":
    _main(sys.argv[1], sys.argv[2], sys.argv[3])
