"""Compiler seeds for a run: each made once per (task, sizes, device, threads, torch
version), in a fresh process, and kept on disk.

A seed is made by compiling the task's reference with torch.compile; that runs in a
fresh Python process (`python -m foundry.seeds.store JOB ANSWER`, so nothing of
Inductor, dynamo or their caches stays in the caller, which may be the judge's actor)
under a time limit. The result, a seed or the
reason there is none, is cached under `<cache root>/seeds/`, so a second run of the same
task does not compile it again.
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
from pathlib import Path

from foundry.paths import cache_root
from foundry.seeds.result import Seed, no_seed
from foundry.types import Task, content_hash

STORE_VERSION = "1"  # bump when what a seed holds changes: older entries are then made again


def seed_key(task: Task, *, device: str, threads: int) -> str:
    import torch
    return content_hash(task.source_hash, device, str(threads), torch.__version__, STORE_VERSION)


def make_in_fresh_process(task: Task, *, device: str, threads: int = 1,
                          timeout_s: float = 300.0) -> tuple[Seed, bool]:
    """(`inductor_seed(task)` made in a fresh Python process, whether that is a verdict
    worth keeping): a process that dies or runs past `timeout_s` gives a Seed without
    source whose note says so, and False (another try may do better)."""
    with tempfile.TemporaryDirectory(prefix="foundry-seed-") as tmp:
        job, answer = Path(tmp) / "job.pkl", Path(tmp) / "seed.json"
        job.write_bytes(pickle.dumps((task, device, int(threads))))
        # one compile thread: Inductor starts no pool of its own that could outlive a kill
        env = {**os.environ, "TORCHINDUCTOR_COMPILE_THREADS": "1"}
        proc = subprocess.Popen([sys.executable, "-m", "foundry.seeds.store", str(job), str(answer)], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        try:
            _, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return no_seed(task.task_id, device, f"seed generation ran past its {timeout_s:.0f} s limit"), False
        try:
            return Seed(**json.loads(answer.read_text())), True
        except (OSError, ValueError, TypeError):
            tail = (err or b"").decode(errors="replace").strip().splitlines()[-1:] or [""]
            return no_seed(task.task_id, device, f"seed generation ended without an answer (exit code "
                                                 f"{proc.returncode}: {tail[0][:200]})"), False


def _main(job: str, answer: str) -> None:  # the fresh process
    task, device, threads = pickle.loads(Path(job).read_bytes())
    try:
        from foundry.seeds.seed import inductor_seed
        seed = inductor_seed(task, device=device, threads=threads)
    except Exception as e:  # noqa: BLE001 - any failure is the seed's note
        seed = no_seed(task.task_id, device, f"seed generation failed: {type(e).__name__}: {e}"[:500])
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

    def get(self, task: Task, *, device: str, threads: int = 1) -> tuple[Seed, bool]:
        """(the seed of `task`, whether it came from the disk)."""
        hit = self.cached(task, device=device, threads=threads)
        if hit is not None:
            return hit, True
        seed, verdict = make_in_fresh_process(task, device=device, threads=threads, timeout_s=self.timeout_s)
        if verdict:
            self._put(seed_key(task, device=device, threads=threads), seed)
        return seed, False

    def _put(self, key: str, seed: Seed) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.root, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(dataclasses.asdict(seed), f)
        os.replace(tmp, self.path(key))


if __name__ == "__main__":
    _main(sys.argv[1], sys.argv[2])
