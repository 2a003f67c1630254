"""Compiler seeds in a run: at the start, each task's seed (Inductor's kernels and wrapper
as a candidate, foundry.seeds) is made where the task runs, by an evaluator actor (a GPU
seed needs the GPU its kernels are compiled for), and judged on an island before that
island's next proposal, like any other candidate: a correct one becomes an elite, a
parent of the search and an inspiration in LLM prompts.

`SeedService` is the evaluator's side (no Ray); `SeedRequests` is the driver's: it asks
the evaluators, a few tasks at a time on each (`seeds_at_once`), without waiting, and
hands each seed that comes back to an island, where it is judged before the island's next
proposal. Every island is told at the start which tasks' seeds are expected, and of each
that fails: a task with a seed expected waits behind the uncovered tasks with none
(actors.task_order). A task its island had retired for lack of new proposals opens again
for its seed, and the driver does not end the run while a seed is still to come; an
island whose loop had ended is run again.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Callable, Mapping

from actors.island_worker import SeedOutcome
from foundry.seeds.result import BACKEND_FOR_DEVICE
from foundry.types import Candidate, Task

log = logging.getLogger(__name__)

SEED_STRATEGY = "compiler:inductor"  # the strategy id of a compiler seed (the report's "won by")
HAND_TIMEOUT_S = 30.0  # the longest the driver waits for an island to take a seed


class SeedService:
    """Makes (or reads from disk) a task's compiler seed for this evaluator's device."""

    def __init__(self, *, device: str, backend: str | None, threads: int = 1, timeout_s: float = 300.0,
                 store: Any = None, gate: Any = None):
        """`gate`: the evaluator's DeviceGate. A seed's process is registered with it, so
        a lane's timed section stops it as it stops other lanes' workers, and it reserves
        device memory for one forward of the task, as a screen does; a seed that ran out
        of device memory is made once more with the lanes' memory reserved whole."""
        self.device, self.backend, self.threads = device, backend, int(threads)
        if store is None:
            from foundry.seeds.store import SeedStore
            store = SeedStore(timeout_s=timeout_s)
        self.store, self.gate = store, gate

    def candidate(self, task: Task) -> tuple[Candidate | None, str]:
        """(the task's seed as a candidate, or None; a note on what was made or why none)."""
        want = BACKEND_FOR_DEVICE.get(self.device)
        if want is None or (self.backend is not None and self.backend != want):
            return None, f"no compiler seed for backend {self.backend!r} on {self.device} (seeds are {want or 'none'})"
        seed, cached = self._get(task)
        note = seed.note + (" (made by an earlier run)" if cached else "")
        if not seed.ok:
            return None, note
        return Candidate.make(task_id=task.task_id, source=seed.source, backend=seed.backend, origin="seed",
                              strategy_id=SEED_STRATEGY, note=seed.note), note

    def _get(self, task: Task):
        if self.gate is None:
            return self.store.get(task, device=self.device, threads=self.threads)
        from foundry.evaluate.device_memory import OOM_RETRY_WAIT_S
        from foundry.evaluate.task_size import meta_size
        size = meta_size(task) if self.device == "cuda" else None
        seed, cached = self._get_holding(task, size.screen_bytes() if size is not None else 0)
        if seed.out_of_memory and self.gate.capacity_bytes:
            # Inductor ran out of device memory beside the lanes' evaluations and other
            # seeds: once the reservations held now have ended, once more with the lanes'
            # device memory reserved whole
            self.gate.wait_for_reservations(timeout_s=OOM_RETRY_WAIT_S)
            seed, cached = self._get_holding(task, self.gate.capacity_bytes)
        return seed, cached

    def _get_holding(self, task: Task, nbytes: int):
        with self.gate.memory(nbytes):
            return self.store.get(task, device=self.device, threads=self.threads, on_start=self.gate.register,
                                  on_end=self.gate.unregister, stopped_s=self.gate.frozen_s)


def seeds_at_once(configured: int | None, *, gpu: bool, host_cpus: int | None = None,
                  gpu_evaluators: int = 1) -> int:
    """How many seeds an evaluator makes at once: `configured` (run.seeds_per_evaluator),
    or by default 1 on a CPU evaluator (a seed's C++ compile takes a core the lanes need)
    and on a GPU one half the host's cores shared among its GPU evaluators, 3 to 8 (a seed
    is mostly CPU work, Inductor's code generation and Triton compiles; every task's seed is
    asked for at the start, so that no task waits long for its compiler floor; the GPU's
    memory is reserved per seed)."""
    if configured is not None:
        return max(1, int(configured))
    if not gpu:
        return 1
    cpus = host_cpus if host_cpus is not None else (os.cpu_count() or 6)
    return max(3, min(8, cpus // (2 * max(1, gpu_evaluators))))


class SeedRequests:
    """The driver's side: one `compiler_seed` call per task, spread over the evaluators,
    at most `per_evaluator` at a time on each (an evaluator's lanes keep their threads)."""

    def __init__(self, *, per_evaluator: int = 1) -> None:
        self.per_evaluator = max(1, int(per_evaluator))
        self.queued: dict[int, list[tuple[Task, int]]] = {}  # evaluator index -> (task, island index)
        self.pending: dict[Any, tuple[str, int, int]] = {}  # object ref -> (task id, island, evaluator)
        self.evaluators: list = []
        self.notes: dict[str, str] = {}  # task id -> what its seed came to

    def start(self, *, tasks: list[Task], evaluators: list, islands: Mapping[int, Any]) -> None:
        """Tell every island which tasks' seeds are expected (`expect_seeds`), then ask the
        evaluators for the first ones."""
        if not evaluators or not islands:
            return
        self.evaluators = list(evaluators)
        for island in islands.values():
            island.expect_seeds.remote([task.task_id for task in tasks])
        order = sorted(islands)
        for k, task in enumerate(tasks):
            self.queued.setdefault(k % len(evaluators), []).append((task, order[k % len(order)]))
        for evaluator in list(self.queued):
            for _ in range(self.per_evaluator):
                self._ask(evaluator)

    def _ask(self, evaluator: int) -> None:
        if self.queued.get(evaluator):
            task, island = self.queued[evaluator].pop(0)
            self.pending[self.evaluators[evaluator].compiler_seed.remote(task)] = (task.task_id, island, evaluator)

    def outstanding(self) -> bool:
        """Whether some task's seed is still to be made or handed over."""
        return bool(self.pending) or any(self.queued.values())

    def collect(self, *, islands: Mapping[int, Any], say: Callable[[str], None]) -> list[int]:
        """Hand the seeds that are ready to their islands (`seed`, which reopens a task
        its island retired for lack of new proposals) and ask for the next ones; returns
        the indices of the islands whose loop had ended and must be run again."""
        import ray
        if not self.pending:
            return []
        ready, _ = ray.wait(list(self.pending), num_returns=len(self.pending), timeout=0)
        handed: dict[Any, int] = {}  # the island's seed call -> island index
        for ref in ready:
            task_id, island, evaluator = self.pending.pop(ref)
            self._ask(evaluator)
            try:
                candidate, note = ray.get(ref)
            except Exception as e:  # noqa: BLE001 - an evaluator that failed here gives no seed
                candidate, note = None, f"no seed: the evaluator failed ({type(e).__name__}: {e})"[:300]
            self.notes[task_id] = note
            if candidate is None:  # no island waits for this seed any more
                for handle in islands.values():
                    handle.seed_failed.remote(task_id)
            if candidate is not None and island in islands:
                handed[islands[island].seed.remote(candidate)] = island
                say(f"compiler seed for {task_id} (judged on island {island}): {note}")
            else:
                log.info("compiler seed for %s: %s", task_id, note)
        rerun: set[int] = set()  # one new loop per island, however many seeds it took
        for ref, island in handed.items():
            try:
                outcome = ray.get(ref, timeout=HAND_TIMEOUT_S)
            except Exception as e:  # noqa: BLE001 - a dead island is restarted by the driver's own watch
                log.warning("island %d did not take its compiler seed: %s", island, e)
                continue
            if outcome == SeedOutcome.QUEUED_LOOP_ENDED:
                rerun.add(island)
        return sorted(rerun)
