"""The driver asks each evaluator for one compiler seed at a time and hands every seed
that comes back to its island (real Ray actors, stand-ins for evaluator and island)."""

from __future__ import annotations

import time

import pytest

from actors.island_worker import SeedOutcome
from actors.seeding import SeedRequests
from foundry.types import Candidate, Task


def _task(i: int) -> Task:
    return Task(task_id=f"t{i}", path=f"t{i}.py", source=f"# {i}")


def test_seeds_are_asked_one_at_a_time_per_evaluator_and_handed_to_islands(ray_session):
    ray = ray_session

    @ray.remote(max_concurrency=4)
    class Evaluator:
        def __init__(self):
            self.running = self.most = 0

        def compiler_seed(self, task):
            self.running += 1
            self.most = max(self.most, self.running)
            time.sleep(0.05)
            self.running -= 1
            if task.task_id == "t3":
                return None, "no seed: no kernels of its own"
            return Candidate.make(task_id=task.task_id, source="class ModelNew: ...", backend="c",
                                  origin="seed"), f"seed for {task.task_id}"

        def most_at_once(self):
            return self.most

    @ray.remote
    class Island:
        def __init__(self):
            self.got = []

        def seed(self, candidate):
            self.got.append(candidate.task_id)
            return SeedOutcome.QUEUED_LOOP_ENDED if candidate.task_id == "t4" else SeedOutcome.QUEUED

        def received(self):
            return self.got

    evaluators = [Evaluator.remote(), Evaluator.remote()]
    islands = {0: Island.remote(), 1: Island.remote()}
    requests, said = SeedRequests(), []
    requests.start(tasks=[_task(i) for i in range(6)], evaluators=evaluators, islands=islands)
    assert len(requests.pending) == 2  # one per evaluator
    deadline = time.time() + 30
    handed = []
    while requests.outstanding() and time.time() < deadline:
        handed += requests.collect(islands=islands, say=said.append)
        time.sleep(0.02)
    assert handed == [0]  # only t4's island had ended its loop
    assert set(requests.notes) == {f"t{i}" for i in range(6)}
    assert requests.notes["t3"] == "no seed: no kernels of its own"
    assert ray.get([e.most_at_once.remote() for e in evaluators]) == [1, 1]
    got = ray.get([islands[0].received.remote(), islands[1].received.remote()])
    assert sorted(got[0] + got[1]) == ["t0", "t1", "t2", "t4", "t5"]
    assert got[1] == ["t1", "t5"] and len(said) == 5  # task k goes to island k % 2 (t3 has no seed)
