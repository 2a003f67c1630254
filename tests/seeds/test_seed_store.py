"""Compiler seeds for a run: made once in a fresh process, kept on disk, and turned into
candidates by the evaluator's SeedService."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.seeding import SEED_STRATEGY, SeedService
from foundry.seeds.result import Seed, no_seed
from foundry.seeds.store import SeedStore, make_in_fresh_process
from foundry.tasks.loader import load_task

ROOT = Path(__file__).resolve().parents[2]
RELU = ROOT / "benchmarks" / "smoke" / "relu.py"


@pytest.fixture(scope="module")
def relu():
    return load_task(str(RELU), profile="small")


def test_a_seed_is_made_once_in_a_fresh_process_then_read_from_disk(relu, tmp_path):
    store = SeedStore(tmp_path)
    seed, cached = store.get(relu, device="cpu")
    assert seed.ok and not cached, seed.note
    assert seed.backend == "c" and "class ModelNew" in seed.source
    again, cached = store.get(relu, device="cpu")
    assert cached and again == seed
    assert len(list(tmp_path.glob("*.json"))) == 1
    assert store.cached(relu, device="cpu", threads=2) is None  # another thread count: another seed


def test_a_seed_that_runs_past_its_limit_is_reported_and_not_kept(relu, tmp_path):
    seen: list = []
    seed = make_in_fresh_process(relu, device="cpu", timeout_s=0.3, on_start=seen.append,
                                 on_end=lambda pid: seen.append(-pid) or 0.0)
    assert not seed.ok and "ran past its 0.3 s limit" in seed.note
    assert len(seen) == 2 and seen[0] == -seen[1] > 0  # the process was announced, then let go
    store = SeedStore(tmp_path, timeout_s=0.3)
    seed, cached = store.get(relu, device="cpu")
    assert not seed.ok and not cached and not list(tmp_path.glob("*.json"))


def test_time_the_process_spent_stopped_does_not_count_against_its_limit(relu):
    seed = make_in_fresh_process(relu, device="cpu", timeout_s=0.5, stopped_s=lambda pid: 600.0)
    assert seed.ok, seed.note  # it took longer than 0.5 s, all of it "stopped"


class _Store:
    def __init__(self, seed: Seed):
        self.seed, self.asked = seed, 0

    def get(self, task, *, device, threads, **process):
        self.asked += 1
        self.process = process
        return self.seed, False


def test_the_evaluators_seed_service_gives_a_seed_candidate_or_the_reason(relu):
    made = Seed(task_id=relu.task_id, device="cpu", backend="c", source="class ModelNew: ...", kernels=1,
                note="a seed")
    cand, note = SeedService(device="cpu", backend="c", store=_Store(made)).candidate(relu)
    assert cand is not None and cand.origin == "seed" and cand.strategy_id == SEED_STRATEGY
    assert cand.source == made.source and cand.backend == "c" and note == "a seed"
    none, why = SeedService(device="cpu", backend="c", store=_Store(no_seed(relu.task_id, "cpu", "no kernels"))
                            ).candidate(relu)
    assert none is None and why == "no seed: no kernels"
    other = _Store(made)
    none, why = SeedService(device="cpu", backend="cuda", store=other).candidate(relu)
    assert none is None and "backend 'cuda'" in why and other.asked == 0


def test_a_seed_process_is_registered_with_the_evaluators_device_gate(relu):
    from foundry.evaluate.device_gate import DeviceGate
    gate = DeviceGate()
    made = Seed(task_id=relu.task_id, device="cpu", backend="c", source="class ModelNew: ...", kernels=1,
                note="a seed")
    store = _Store(made)
    cand, _ = SeedService(device="cpu", backend="c", store=store, gate=gate).candidate(relu)
    assert cand is not None
    # other lanes' timed sections stop it like their workers; its stopped time extends its limit
    assert store.process == {"on_start": gate.register, "on_end": gate.unregister, "stopped_s": gate.frozen_s}


class _Sequence(_Store):
    """Answers with `seeds` in turn, noting the gate's reserved bytes at each call."""

    def __init__(self, seeds: list, gate):
        super().__init__(seeds[0])
        self.seeds, self.gate, self.reserved = list(seeds), gate, []

    def get(self, task, *, device, threads, **process):
        self.reserved.append(self.gate.snapshot()["reserved_bytes"])
        self.seed = self.seeds[min(self.asked, len(self.seeds) - 1)]
        return super().get(task, device=device, threads=threads, **process)


def test_a_seed_that_ran_out_of_device_memory_is_made_again_with_the_memory_reserved_whole(relu):
    import threading
    import time

    from foundry.evaluate.device_gate import DeviceGate
    gate = DeviceGate(capacity_bytes=100)
    made = Seed(task_id=relu.task_id, device="cpu", backend="c", source="class ModelNew: ...", kernels=1,
                note="a seed")
    out = no_seed(relu.task_id, "cpu", "torch.compile failed: OutOfMemoryError", out_of_memory=True)
    store = _Sequence([out, made], gate)
    holding, done = threading.Event(), threading.Event()

    def other_lane():  # another lane's evaluation holds 60 of the 100 for a while
        with gate.memory(60):
            holding.set()
            time.sleep(0.3)
            done.set()
    lane = threading.Thread(target=other_lane)
    lane.start()
    holding.wait()
    cand, note = SeedService(device="cpu", backend="c", store=store, gate=gate).candidate(relu)
    lane.join()
    assert cand is not None and note == "a seed" and done.is_set()
    assert store.asked == 2 and store.reserved == [60, 100]  # the second once the other lane had ended
    # another reason for no seed is not tried again
    other = _Sequence([no_seed(relu.task_id, "cpu", "no kernels"), made], gate)
    none, why = SeedService(device="cpu", backend="c", store=other, gate=gate).candidate(relu)
    assert none is None and why == "no seed: no kernels" and other.asked == 1


def test_a_capture_out_of_device_memory_gives_a_seed_that_says_so(relu, monkeypatch):
    import torch

    import foundry.seeds.seed as seed_module

    def out_of_memory(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 4.00 GiB")
    monkeypatch.setattr(seed_module, "capture", out_of_memory)
    seed = seed_module.inductor_seed(relu, device="cpu")
    assert not seed.ok and seed.out_of_memory and "OutOfMemoryError" in seed.note

    def broken(*args, **kwargs):
        raise ValueError("an op Inductor cannot lower")
    monkeypatch.setattr(seed_module, "capture", broken)
    seed = seed_module.inductor_seed(relu, device="cpu")
    assert not seed.ok and not seed.out_of_memory and "cannot lower" in seed.note
