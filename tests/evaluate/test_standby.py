"""Children forked ahead of their job (`EvalConfig.standby`: a GPU's jobs start without
waiting for a CUDA context): run on the CPU here, with the standby path forced on."""

from __future__ import annotations

import os
import signal
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest

import foundry.evaluate.evaluator as evaluator_module
from foundry.evaluate import EvalConfig, Evaluator
from foundry.evaluate.device_gate import DeviceGate
from foundry.evaluate.sandbox import run_job
from foundry.tasks import load_task
from foundry.types import Candidate
from support.processes import is_alive, process_state

ROOT = Path(__file__).resolve().parents[2]
HONEST = (ROOT / "tests" / "exploits" / "candidates" / "honest_relu_c.py").read_text()


@pytest.fixture()
def standby_judge(monkeypatch, tmp_path):
    """An Evaluator whose jobs go through the standby path (as on a GPU: no address cap)."""
    jobs: list = []

    def with_standby(worker, job, **kw):
        assert kw["standby"] == (job.kind != "baseline")  # candidates and screens only
        before = worker.standby.pid if worker.standby is not None else None
        out = run_job(worker, job, **{**kw, "address_cap": False})  # as on a GPU
        jobs.append((before, out))
        return out
    monkeypatch.setattr(evaluator_module, "run_job", with_standby)
    ev = Evaluator(config=EvalConfig.from_config({
        "trials": 2, "timeout_s": 20, "compile_baseline": False, "timing_min_ms": 20, "standby": True,
        "baseline_cache_dir": str(tmp_path / "baselines")}))
    yield ev, jobs
    ev.close()


def test_the_next_job_runs_in_the_child_forked_ahead_and_is_judged_as_before(standby_judge):
    ev, jobs = standby_judge
    relu = load_task(ROOT / "benchmarks" / "smoke" / "relu.py")
    cand = Candidate.make(task_id=relu.task_id, source=textwrap.dedent(HONEST), backend="c")
    first = ev.evaluate(task=relu, candidate=cand)
    assert first.correct, first.error
    waiting = ev._worker.standby
    assert waiting is not None and is_alive(waiting.pid) and os.path.isdir(waiting.setup["tmpdir"])
    second = ev.evaluate(task=relu, candidate=cand)
    assert second.correct, second.error
    assert second.metrics.get("forked_ahead") and not first.metrics.get("forked_ahead")
    assert any(before == waiting.pid and out.forked_ahead for before, out in jobs)
    assert not is_alive(waiting.pid)  # its job ran there, and it was killed after
    assert not os.path.exists(waiting.setup["tmpdir"])
    assert ev._worker.standby is not None and ev._worker.standby.pid != waiting.pid
    # a wrong answer is still caught in a child forked ahead
    wrong = HONEST.replace("y[i] = x[i] > 0.f ? x[i] : 0.f;", "y[i] = x[i];")
    bad = ev.evaluate(task=relu, candidate=Candidate.make(task_id=relu.task_id, source=textwrap.dedent(wrong),
                                                          backend="c"))
    assert not bad.correct
    # a child forked ahead that died is replaced by a plain fork
    dead = ev._worker.standby
    os.killpg(dead.pid, signal.SIGKILL)
    time.sleep(0.2)
    again = ev.evaluate(task=relu, candidate=cand)
    assert again.correct, again.error
    last = ev._worker.standby
    ev.close()  # the child forked ahead goes with the judge, and its tmpdir
    assert not is_alive(last.pid) and not os.path.exists(last.setup["tmpdir"])


def test_a_child_forked_for_other_settings_is_discarded(tmp_path):
    from foundry.evaluate.warm_worker import warm_worker_for
    worker = warm_worker_for(EvalConfig.from_config({"device": "cpu"}))
    try:
        tmp = tempfile.mkdtemp(prefix="foundry-w-")
        setup = {"tmpdir": tmp, "memory_mb": 512, "fsize_mb": 256, "address_cap": False, "isolate": False,
                 "cache_env": {}, "device": "cpu", "threads": 1}
        ready = worker.prepare_standby(setup)
        assert ready is not None and worker.prepare_standby(setup) is None  # one at a time
        assert worker.take_standby({**setup, "threads": 2}) is None  # other settings: not handed out
        assert worker.take_standby({**setup, "tmpdir": "/elsewhere", "memory_mb": 9}) is ready
        worker.standby = ready
        assert worker.discard_standby() == ready.pid
        assert not is_alive(ready.pid) and not os.path.exists(tmp)
    finally:
        worker.close()


def test_a_standby_worker_is_stopped_for_every_lanes_timed_section_until_a_lane_adopts_it():
    import subprocess
    import sys
    gate = DeviceGate()
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
    try:
        gate.register(child.pid, standby=True)  # forked by this thread, for no lane yet
        with gate.exclusive():
            time.sleep(0.05)
            assert process_state(child.pid) == "T"  # even this thread's timed section stops it
        assert process_state(child.pid) != "T"
        box: dict = {}

        def other_lane():
            gate.adopt(child.pid)
            box["frozen"] = gate.frozen_s(child.pid)
        t = threading.Thread(target=other_lane)
        t.start()
        t.join()
        assert box["frozen"] == 0.0  # its stopped time before the job does not extend the job's deadline
        with gate.exclusive():  # now another lane's worker: stopped here
            time.sleep(0.05)
            assert process_state(child.pid) == "T"
        assert gate.unregister(child.pid) > 0.0
    finally:
        child.kill()
        child.wait()


def test_a_standby_worker_taken_inside_the_lanes_own_timed_section_goes_on_at_once():
    """A job run with the device held (a large speedup's recheck) may get the child forked
    ahead, which that very section stopped: adopting it must let it run, or the lane
    would wait for it forever while holding the device."""
    import subprocess
    import sys
    gate = DeviceGate()
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
    try:
        with gate.exclusive():
            gate.register(child.pid, standby=True)
            time.sleep(0.05)
            assert process_state(child.pid) == "T"  # no lane's yet: stopped
            gate.adopt(child.pid)
            time.sleep(0.05)
            assert process_state(child.pid) != "T"  # this section's worker now
            assert gate.frozen_s(child.pid) == 0.0
    finally:
        gate.unregister(child.pid)
        child.kill()
        child.wait()


@pytest.mark.timeout(180)
def test_a_recheck_with_the_device_held_runs_in_the_child_forked_ahead(monkeypatch, tmp_path):
    def with_standby(worker, job, **kw):
        return run_job(worker, job, **{**kw, "address_cap": False})  # as on a GPU
    monkeypatch.setattr(evaluator_module, "run_job", with_standby)
    relu = load_task(ROOT / "benchmarks" / "smoke" / "relu.py")
    cand = Candidate.make(task_id=relu.task_id, source=textwrap.dedent(HONEST), backend="c")
    with Evaluator(config=EvalConfig.from_config({
            "trials": 2, "timeout_s": 20, "compile_baseline": False, "timing_min_ms": 20, "standby": True,
            "speedup_recheck_threshold": 0.0, "baseline_cache_dir": str(tmp_path / "baselines")})) as ev:
        for _ in range(2):  # the second's recheck gets the child forked after its own first job
            result = ev.evaluate(task=relu, candidate=cand)
            assert result.correct, result.error
            assert result.metrics.get("speedup_rechecked") and "recheck_failed" not in (result.flags or ())
