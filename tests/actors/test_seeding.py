"""The driver asks each evaluator for a few compiler seeds at a time (one by default) and
hands every seed that comes back to its island (real Ray actors, stand-ins for evaluator
and island)."""

from __future__ import annotations

import time

import pytest

from actors.island_worker import SeedOutcome
from actors.seeding import SeedRequests, seeds_at_once
from foundry.types import Candidate, Task


def _task(i: int) -> Task:
    return Task(task_id=f"t{i}", path=f"t{i}.py", source=f"# {i}")


@pytest.mark.parametrize("per_evaluator", [1, 2])
def test_seeds_are_asked_a_few_at_a_time_per_evaluator_and_handed_to_islands(ray_session, per_evaluator):
    ray = ray_session

    @ray.remote(max_concurrency=4)
    class Evaluator:
        def __init__(self):
            self.running = self.most = 0

        def compiler_seed(self, task):
            self.running += 1
            self.most = max(self.most, self.running)
            time.sleep(0.2)
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
            self.got, self.expected, self.failed = [], [], []

        def expect_seeds(self, task_ids):
            self.expected += task_ids

        def seed_failed(self, task_id):
            self.failed.append(task_id)

        def seed(self, candidate):
            self.got.append(candidate.task_id)
            return SeedOutcome.QUEUED_LOOP_ENDED if candidate.task_id == "t4" else SeedOutcome.QUEUED

        def received(self):
            return self.got

        def seeds_told(self):
            return self.expected, self.failed

    evaluators = [Evaluator.remote(), Evaluator.remote()]
    islands = {0: Island.remote(), 1: Island.remote()}
    requests, said = SeedRequests(per_evaluator=per_evaluator), []
    requests.start(tasks=[_task(i) for i in range(6)], evaluators=evaluators, islands=islands)
    assert len(requests.pending) == 2 * per_evaluator  # that many per evaluator
    deadline = time.time() + 30
    handed = []
    while requests.outstanding() and time.time() < deadline:
        handed += requests.collect(islands=islands, say=said.append)
        time.sleep(0.02)
    assert handed == [0]  # only t4's island had ended its loop
    assert set(requests.notes) == {f"t{i}" for i in range(6)}
    assert requests.notes["t3"] == "no seed: no kernels of its own"
    assert ray.get([e.most_at_once.remote() for e in evaluators]) == [per_evaluator] * 2
    got = ray.get([islands[0].received.remote(), islands[1].received.remote()])
    assert sorted(got[0] + got[1]) == ["t0", "t1", "t2", "t4", "t5"]
    assert got[1] == ["t1", "t5"] and len(said) == 5  # task k goes to island k % 2 (t3 has no seed)
    # every island was told which seeds were asked for, and that t3's failed
    asked = [f"t{i}" for i in range(6)]
    assert ray.get([i.seeds_told.remote() for i in islands.values()]) == [(asked, ["t3"])] * 2


def test_a_gpu_evaluator_makes_seeds_on_half_its_share_of_the_cores_and_a_cpu_one_one():
    assert seeds_at_once(None, gpu=True, host_cpus=16) == 8  # the H200 host: 16 cores, one GPU
    assert seeds_at_once(None, gpu=True, host_cpus=32, gpu_evaluators=2) == 8
    assert seeds_at_once(None, gpu=True, host_cpus=4) == 3 and seeds_at_once(None, gpu=True, host_cpus=64) == 8
    assert seeds_at_once(None, gpu=False, host_cpus=16) == 1
    assert seeds_at_once(2, gpu=False) == 2 and seeds_at_once(5, gpu=True) == 5
