"""TaskSetup on a GPU judge records the reference's ops on the device first (sizes come
with it) and sizes on the meta device only when that forward fails; an out-of-memory
forward is reported as a task too large, naming it. Run on the CPU with the device
forward replaced. An out-of-memory forward is first tried again with the lanes' device
memory reserved whole: other lanes' evaluations may have held it."""

from __future__ import annotations

from pathlib import Path

import pytest

from foundry.evaluate.config import EvalConfig
from foundry.evaluate.task_setup import TaskSetup
from foundry.evaluate.task_size import TaskTooLarge
from foundry.tasks import load_task

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def relu():
    return load_task(ROOT / "benchmarks" / "smoke" / "relu.py")


def _setup(monkeypatch, record, gate=None):
    setup = TaskSetup(config=EvalConfig(device="cuda"), reference=None, gate=gate)
    monkeypatch.setattr(setup, "_record_ops", record)
    return setup


def test_a_forward_that_fits_gives_the_sizes_without_the_meta_device(monkeypatch, relu):
    import foundry.evaluate.task_setup as task_setup
    monkeypatch.setattr(task_setup, "meta_size", lambda task: pytest.fail("sized on the meta device"))

    def record(task, quiet=True):
        setup.sizes[task.source_hash] = (1000, 1000)
        return frozenset({"aten.relu.default"})
    setup = _setup(monkeypatch, record)
    assert setup.reference_ops(relu) == frozenset({"aten.relu.default"})
    assert setup.evaluation_bytes(relu) > 0 and set(setup.parts[relu.source_hash]) == {"reference_ops_s", "fit_check_s"}


def test_an_out_of_memory_forward_is_a_task_too_large_naming_it(monkeypatch, relu):
    def record(task, quiet=True):
        raise RuntimeError("CUDA out of memory. Tried to allocate 6.40 GiB")
    setup = _setup(monkeypatch, record)
    with pytest.raises(TaskTooLarge, match="relu.*out of device memory with the lanes' device memory reserved whole"):
        setup.reference_ops(relu)
    with pytest.raises(TaskTooLarge):  # remembered: not tried again
        setup.reference_ops(relu)


def test_another_failing_forward_is_left_to_the_worker_to_report(monkeypatch, relu):
    def record(task, quiet=True):
        raise ValueError("the task itself is broken")
    setup = _setup(monkeypatch, record)
    assert setup.reference_ops(relu) == frozenset()


def test_an_out_of_memory_forward_beside_other_lanes_is_tried_again_with_the_memory_reserved_whole(
        monkeypatch, relu):
    import threading
    import time

    from foundry.evaluate.device_gate import DeviceGate
    gate = DeviceGate(capacity_bytes=100)
    other_lane_done = threading.Event()
    seen = []

    def record(task, quiet=True):
        seen.append((gate.snapshot()["reserved_bytes"], other_lane_done.is_set()))
        if len(seen) == 1:
            raise RuntimeError("CUDA out of memory. Tried to allocate 16.00 GiB")
        setup.sizes[task.source_hash] = (1000, 1000)
        return frozenset({"aten.relu.default"})
    setup = _setup(monkeypatch, record, gate)

    def other_lane():  # an evaluation on another lane holds 60 of the 100 for a while
        with gate.memory(60):
            holding.set()
            time.sleep(0.3)
            other_lane_done.set()
    holding = threading.Event()
    lane = threading.Thread(target=other_lane)
    lane.start()
    holding.wait()
    assert setup.reference_ops(relu) == frozenset({"aten.relu.default"})
    lane.join()
    # first try beside the other lane's 60; the second only once it ended, holding all 100
    assert seen == [(60, False), (100, True)]
    assert setup.reference_ops(relu) == frozenset({"aten.relu.default"}) and len(seen) == 2
    assert gate.snapshot()["reserved_bytes"] == 0


def test_the_first_forwards_tensors_are_gone_before_it_is_tried_again(monkeypatch, relu):
    """The second try ran inside the except clause, whose exception kept the first
    forward's frames, and the inputs and intermediates they held, alive."""
    import weakref

    import torch

    from foundry.evaluate.device_gate import DeviceGate
    held, seen = [], []

    def record(task, quiet=True):
        if not held:
            intermediate = torch.ones(4)  # held by the failing forward's frame
            held.append(weakref.ref(intermediate))
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 16.00 GiB")
        seen.append(held[0]() is None)
        setup.sizes[task.source_hash] = (1000, 1000)
        return frozenset({"aten.relu.default"})
    setup = _setup(monkeypatch, record, DeviceGate(capacity_bytes=100))
    assert setup.reference_ops(relu) == frozenset({"aten.relu.default"})
    assert seen == [True]
