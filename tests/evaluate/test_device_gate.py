"""DeviceGate: one timed section at a time, other lanes' workers really stopped, judge
work kept out of timed sections, device memory reserved per evaluation."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from foundry.evaluate.device_gate import DeviceGate
from support.processes import process_state


def _spinner() -> subprocess.Popen:
    """A process in its own group that burns CPU until killed."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)


def _in_thread(fn):
    box: dict = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001
            box["error"] = e
    t = threading.Thread(target=run, daemon=True)  # a test that fails must not hang the session
    t.start()
    return t, box


def _wait_until(cond, timeout=5.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.01)
    return False


def test_exclusive_section_stops_other_lanes_workers_and_continues_them():
    gate = DeviceGate()
    other = _spinner()
    try:
        t, box = _in_thread(lambda: gate.register(other.pid))  # registered by another lane
        t.join()
        assert "error" not in box
        with gate.exclusive():
            assert _wait_until(lambda: process_state(other.pid) == "T"), "the other lane's worker still runs"
            time.sleep(0.1)
        assert _wait_until(lambda: process_state(other.pid) != "T")
        assert gate.frozen_s(other.pid) >= 0.1
        assert gate.snapshot()["freezes"] == 1
        assert gate.unregister(other.pid) >= 0.1
    finally:
        other.kill()
        other.wait()


def test_the_timed_lanes_own_worker_keeps_running():
    gate = DeviceGate()
    mine = _spinner()
    try:
        gate.register(mine.pid)
        with gate.exclusive():
            time.sleep(0.05)
            assert process_state(mine.pid) != "T"
        assert gate.frozen_s(mine.pid) == 0.0
    finally:
        gate.unregister(mine.pid)
        mine.kill()
        mine.wait()


def test_a_stopped_worker_can_still_be_killed():
    gate = DeviceGate()
    other = _spinner()
    t, _ = _in_thread(lambda: gate.register(other.pid))
    t.join()
    with gate.exclusive():
        assert _wait_until(lambda: process_state(other.pid) == "T")
        os.killpg(other.pid, 9)
        gate.unregister(other.pid)
    assert other.wait(timeout=5) == -9


def test_judge_work_waits_for_a_timed_section_and_timing_waits_for_judge_work():
    gate = DeviceGate()
    order: list[str] = []
    gate.acquire_exclusive()
    t, box = _in_thread(lambda: _shared_then(gate, order))
    time.sleep(0.1)
    assert order == []  # blocked while the device is held alone
    order.append("timed")
    gate.release_exclusive()
    t.join(5)
    assert order == ["timed", "shared"]

    inside = threading.Event()
    leave = threading.Event()

    def hold_shared():
        with gate.shared():
            inside.set()
            leave.wait(5)
    t2, _ = _in_thread(hold_shared)
    assert inside.wait(5)
    timed = threading.Event()
    done_timing = threading.Event()

    def time_alone():
        with gate.exclusive():
            timed.set()
            done_timing.wait(5)
    t3, box3 = _in_thread(time_alone)
    time.sleep(0.1)
    assert not timed.is_set(), "the timed section began during judge work"
    # a waiting timed section goes first: new judge work waits behind it
    t4, box4 = _in_thread(lambda: _shared_then(gate, order))
    time.sleep(0.05)
    assert order == ["timed", "shared"]
    leave.set()
    assert timed.wait(5)
    time.sleep(0.05)
    assert order == ["timed", "shared"]  # still waiting while the device is held alone
    done_timing.set()
    for t in (t2, t3, t4):
        t.join(5)
        assert not t.is_alive()
    assert "error" not in box3 and "error" not in box4
    assert order == ["timed", "shared", "shared"]


def _shared_then(gate: DeviceGate, order: list) -> None:
    with gate.shared():
        order.append("shared")


def test_shared_inside_shared_passes_even_with_a_timed_section_waiting():
    gate = DeviceGate()
    inside = threading.Event()
    go_on = threading.Event()
    nested: list[bool] = []

    def judge():
        with gate.shared():
            inside.set()
            go_on.wait(5)
            with gate.shared():  # would wait for the waiting writer, which waits for us
                nested.append(True)
            with gate.shared_if_free() as free:
                nested.append(free)
    t, box = _in_thread(judge)
    assert inside.wait(5)
    w, _ = _in_thread(lambda: _timed_briefly(gate))  # a timed section now waits
    time.sleep(0.05)
    go_on.set()
    t.join(5)
    assert not t.is_alive() and nested == [True, True] and "error" not in box
    w.join(5)


def _timed_briefly(gate: DeviceGate) -> None:
    with gate.exclusive():
        pass


def test_nesting_rules():
    gate = DeviceGate()
    with gate.exclusive():
        with gate.exclusive(), gate.shared():  # the holder passes through both
            pass
        assert gate.holds_exclusive()
    assert not gate.holds_exclusive()
    with gate.shared():
        with pytest.raises(RuntimeError, match="shared"):
            gate.acquire_exclusive()
    with pytest.raises(RuntimeError):
        gate.release_exclusive()


def test_memory_reservations_wait_for_room_and_never_exceed_capacity():
    gate = DeviceGate(capacity_bytes=100)
    peak = [0]
    now = [0]
    lock = threading.Lock()

    def use(n):
        with gate.memory(n):
            with lock:
                now[0] += min(n, 100)
                peak[0] = max(peak[0], now[0])
            time.sleep(0.05)
            with lock:
                now[0] -= min(n, 100)
    threads = [threading.Thread(target=use, args=(n,)) for n in (60, 60, 30, 250)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert peak[0] <= 100
    assert gate.snapshot()["reserved_bytes"] == 0
    with gate.exclusive(), pytest.raises(RuntimeError, match="before the exclusive"):
        with gate.memory(10):
            pass


class _RecordingGate(DeviceGate):
    """Records each outermost timed section as (thread, start, end)."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.sections: list[tuple[int, float, float]] = []
        self._starts: dict[int, float] = {}

    def acquire_exclusive(self) -> float:
        nested = self.holds_exclusive()
        waited = super().acquire_exclusive()
        if not nested:
            self._starts[threading.get_ident()] = time.monotonic()
        return waited

    def release_exclusive(self) -> None:
        me = threading.get_ident()
        outermost = self._depth == 1
        end = time.monotonic()
        super().release_exclusive()
        if outermost:
            self.sections.append((me, self._starts.pop(me), end))


def test_two_lanes_on_one_gate_overlap_but_never_time_at_once(tmp_path):
    """Two Evaluators (lanes) sharing one gate, each in its own thread: both judge an
    honest candidate correctly, their evaluations overlap in time, and no two timed
    sections (each lane's timing, each baseline) ever overlap."""
    from pathlib import Path

    from foundry.evaluate import EvalConfig, Evaluator
    from foundry.tasks import load_task
    from foundry.types import Candidate

    root = Path(__file__).resolve().parents[2]
    task = load_task(root / "benchmarks" / "smoke" / "relu.py")
    source = (root / "tests" / "exploits" / "candidates" / "honest_relu_c.py").read_text()
    gate = _RecordingGate()
    config = EvalConfig.from_config({"trials": 3, "timeout_s": 30, "compile_baseline": False,
                                     "timing_min_ms": 150, "baseline_cache_dir": str(tmp_path)})
    lanes = [Evaluator(config=config, gate=gate) for _ in range(2)]
    spans: list[tuple[float, float]] = []
    try:
        def judge(lane):
            t0 = time.monotonic()
            results = [lane.evaluate(task=task, candidate=Candidate.make(task_id=task.task_id, source=source,
                                                                          backend="c")) for _ in range(2)]
            spans.append((t0, time.monotonic()))
            return results
        threads = [_in_thread(lambda lane=lane: judge(lane)) for lane in lanes]
        for t, _ in threads:
            t.join(180)
        for _, box in threads:
            assert "error" not in box, box.get("error")
            assert all(r.correct for r in box["value"]), [r.error for r in box["value"]]
            assert all(set(r.metrics["device_gate_s"]) == {"waited", "stopped"} for r in box["value"])
    finally:
        for lane in lanes:
            lane.close()
    (a0, a1), (b0, b1) = spans
    assert min(a1, b1) > max(a0, b0), "the lanes did not run at once"
    sections = sorted(gate.sections, key=lambda s: s[1])
    assert len({s[0] for s in sections}) == 2 and len(sections) >= 4  # 2 timings per lane (+ a baseline)
    for (_, _, end), (_, start, _) in zip(sections, sections[1:]):
        assert start >= end, "two timed sections overlapped"
    assert gate.snapshot()["reserved_bytes"] == 0


def test_a_retry_waits_for_the_reservations_held_when_it_asked_and_no_later_ones():
    gate = DeviceGate(capacity_bytes=100)
    release_old, old_held = threading.Event(), threading.Event()
    release_new, new_held = threading.Event(), threading.Event()

    def hold(held, release):
        with gate.memory(30):
            held.set()
            release.wait(10)

    old = threading.Thread(target=hold, args=(old_held, release_old), daemon=True)
    old.start()
    assert old_held.wait(5)
    assert gate.wait_for_reservations(timeout_s=0.2) is False  # the old one is still held
    done = []
    waiter = threading.Thread(target=lambda: done.append(gate.wait_for_reservations(timeout_s=10)), daemon=True)
    waiter.start()
    time.sleep(0.1)
    new = threading.Thread(target=hold, args=(new_held, release_new), daemon=True)  # begins after the ask
    new.start()
    assert new_held.wait(5) and not done
    release_old.set()
    waiter.join(5)
    assert done == [True]  # the new reservation, still held, does not keep it waiting
    release_new.set()
    new.join(5)
    old.join(5)


def test_a_reservation_of_the_whole_capacity_goes_first():
    gate = DeviceGate(capacity_bytes=100)
    order: list[str] = []
    release_first, first_held = threading.Event(), threading.Event()

    def first():  # a lane's evaluation, under way
        with gate.memory(60):
            first_held.set()
            release_first.wait(10)
            with gate.memory(10):  # a thread that holds a reservation is not held back
                order.append("first's nested")

    def whole():  # a retry after running out of memory
        with gate.memory(100):
            order.append("whole")

    def later():  # another lane's next evaluation, which would fit beside the first
        with gate.memory(30):
            order.append("later")

    lanes = [threading.Thread(target=first, daemon=True)]
    lanes[0].start()
    assert first_held.wait(5)
    lanes.append(threading.Thread(target=whole, daemon=True))
    lanes[1].start()
    time.sleep(0.1)
    lanes.append(threading.Thread(target=later, daemon=True))
    lanes[2].start()
    time.sleep(0.2)
    assert order == []  # 60 + 30 would fit, but the whole-capacity reservation waits first
    release_first.set()
    for lane in lanes:
        lane.join(5)
    assert order == ["first's nested", "whole", "later"]
    assert gate.snapshot()["reserved_bytes"] == 0
