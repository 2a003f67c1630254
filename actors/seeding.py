"""Compiler seeds in a run: at the start, each task's seed (Inductor's kernels and wrapper
as a candidate, foundry.seeds) is made where the task runs, by an evaluator actor (a GPU
seed needs the GPU its kernels are compiled for), and judged on an island before
anything it proposes, like any other candidate: a correct one becomes an elite, a parent
of the search and an inspiration in LLM prompts.

`SeedService` is the evaluator's side (no Ray); `SeedRequests` is the driver's: it asks
the evaluators, one task each in turn, without waiting, and hands each seed that comes
back to an island.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Mapping

from foundry.types import Candidate, Task

log = logging.getLogger(__name__)

SEED_STRATEGY = "compiler:inductor"  # the strategy id of a compiler seed (the report's "won by")
SEED_BACKENDS = {"cpu": "c", "cuda": "triton"}  # the backend a seed is made in, per device


class SeedService:
    """Makes (or reads from disk) a task's compiler seed for this evaluator's device."""

    def __init__(self, *, device: str, backend: str | None, threads: int = 1, timeout_s: float = 300.0,
                 store: Any = None):
        self.device, self.backend, self.threads = device, backend, int(threads)
        if store is None:
            from foundry.seeds.store import SeedStore
            store = SeedStore(timeout_s=timeout_s)
        self.store = store

    def candidate(self, task: Task) -> tuple[Candidate | None, str]:
        """(the task's seed as a candidate, or None; a note on what was made or why none)."""
        want = SEED_BACKENDS.get(self.device)
        if want is None or (self.backend is not None and self.backend != want):
            return None, f"no compiler seed for backend {self.backend!r} on {self.device} (seeds are {want or 'none'})"
        seed, cached = self.store.get(task, device=self.device, threads=self.threads)
        note = seed.note + (" (made by an earlier run)" if cached else "")
        if not seed.ok:
            return None, note
        return Candidate.make(task_id=task.task_id, source=seed.source, backend=seed.backend, origin="seed",
                              strategy_id=SEED_STRATEGY, note=seed.note), note


class SeedRequests:
    """The driver's side: one `compiler_seed` call per task, spread over the evaluators."""

    def __init__(self) -> None:
        self.pending: dict[Any, tuple[str, int]] = {}  # object ref -> (task id, island index)
        self.notes: dict[str, str] = {}  # task id -> what its seed came to

    def start(self, *, tasks: list[Task], evaluators: list, islands: Mapping[int, Any]) -> None:
        if not evaluators or not islands:
            return
        order = sorted(islands)
        for k, task in enumerate(tasks):
            ref = evaluators[k % len(evaluators)].compiler_seed.remote(task)
            self.pending[ref] = (task.task_id, order[k % len(order)])

    def collect(self, *, islands: Mapping[int, Any], say: Callable[[str], None]) -> int:
        """Hand the seeds that are ready to their islands; returns how many were handed."""
        import ray
        if not self.pending:
            return 0
        ready, _ = ray.wait(list(self.pending), num_returns=len(self.pending), timeout=0)
        handed = 0
        for ref in ready:
            task_id, island = self.pending.pop(ref)
            try:
                candidate, note = ray.get(ref)
            except Exception as e:  # noqa: BLE001 - an evaluator that failed here gives no seed
                candidate, note = None, f"no seed: the evaluator failed ({type(e).__name__}: {e})"[:300]
            self.notes[task_id] = note
            if candidate is not None and island in islands:
                islands[island].resubmit.remote([candidate])
                handed += 1
                say(f"compiler seed for {task_id} (judged on island {island}): {note}")
            else:
                log.info("compiler seed for %s: %s", task_id, note)
        return handed
