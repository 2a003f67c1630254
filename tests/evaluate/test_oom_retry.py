"""The judge running out of device memory beside other lanes is not the candidate's fault:
the evaluation (or screen) is judged again once; any other judge error is not retried."""

import threading
import time
import weakref
from pathlib import Path

import pytest
import torch

from foundry.evaluate import EvalConfig, Evaluator
from foundry.evaluate.device_memory import WorkerOutOfMemory, judge_out_of_memory
from foundry.evaluate.screen_step import refused
from foundry.tasks.loader import load_task
from foundry.types import Candidate, EvalResult, Stage

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def relu_task():
    return load_task(str(ROOT / "benchmarks" / "smoke" / "relu.py"), profile="small")


def _judge(monkeypatch, errors):
    ev = Evaluator(config=EvalConfig.from_config({"device": "cpu"}))
    calls = []

    def fake_evaluate(task, cand, t0, phases, whole_device=False):
        calls.append((cand.candidate_id, whole_device))
        if errors:
            raise errors.pop(0)
        return EvalResult(candidate_id=cand.candidate_id, task_id=task.task_id, stage=int(Stage.CORRECT),
                          correct=True, runtime_ms=1.0)
    monkeypatch.setattr(ev, "_evaluate", fake_evaluate)
    return ev, calls


def test_the_judges_out_of_memory_is_judged_again_once(monkeypatch, relu_task):
    cand = Candidate.make(task_id=relu_task.task_id, source="# k", backend="c")
    ev, calls = _judge(monkeypatch, [torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 6.00 GiB")])
    try:
        result = ev.evaluate(task=relu_task, candidate=cand)
    finally:
        ev.close()
    assert result.correct and [whole for _, whole in calls] == [False, True]  # the second try: memory reserved whole
    assert "CUDA out of memory" in result.metrics["judge_out_of_memory_retried"]
    assert "device_memory_wait" in result.metrics["phases"]


def test_a_second_out_of_memory_or_another_error_fails_as_before(monkeypatch, relu_task):
    cand = Candidate.make(task_id=relu_task.task_id, source="# k", backend="c")
    ev, calls = _judge(monkeypatch, [torch.OutOfMemoryError("CUDA out of memory"), torch.OutOfMemoryError("CUDA out of memory")])
    try:
        twice = ev.evaluate(task=relu_task, candidate=cand)
        other_ev, other_calls = _judge(monkeypatch, [ValueError("a bug in the judge")])
        other = other_ev.evaluate(task=relu_task, candidate=cand)
        other_ev.close()
    finally:
        ev.close()
    assert not twice.correct and "evaluator_error" in twice.flags and len(calls) == 2
    assert not other.correct and "evaluator_error" in other.flags and len(other_calls) == 1
    assert "judge_out_of_memory_retried" not in other.metrics


def test_what_counts_as_the_judge_running_out_of_device_memory():
    assert judge_out_of_memory(torch.OutOfMemoryError("x"))
    assert judge_out_of_memory(WorkerOutOfMemory("the worker's"))
    assert judge_out_of_memory(RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert not judge_out_of_memory(MemoryError("host"))
    assert not judge_out_of_memory(ValueError("CUDA error: an illegal memory access"))


MODES = '''
import torch
import torch.nn as nn
from foundry.kernels import c
TUNABLE = {"MODE": [0, 1]}
SRC = r"""
#include <stdint.h>
void relu(const float* x, float* y, int64_t n) { for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0.f ? x[i] : 0.f; }
"""
lib = c.build(SRC)
class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        lib.relu(x.contiguous(), y, x.numel())
        return y
'''


def test_a_screen_is_retried_after_the_judges_out_of_memory_and_fails_its_points_on_other_errors(
        monkeypatch, relu_task):
    cand = Candidate.make(task_id=relu_task.task_id, source=MODES, backend="c")
    points = [{"MODE": 0}, {"MODE": 1}]
    ev = Evaluator(config=EvalConfig.from_config({"device": "cpu"}))
    real = ev._reference_outputs
    errors = [torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 6.00 GiB")]

    def flaky_references(*args, **kwargs):
        if errors:
            raise errors.pop(0)
        return real(*args, **kwargs)
    monkeypatch.setattr(ev, "_reference_outputs", flaky_references)
    try:
        retried = ev.screen(task=relu_task, candidate=cand, points=points)
        errors.append(ValueError("a bug in the judge"))
        failed = ev.screen(task=relu_task, candidate=cand, points=points)
    finally:
        ev.close()
    assert all(p.ok for p in retried), retried
    assert [p.ok for p in failed] == [False, False]
    assert all("the screen failed in the judge: ValueError: a bug in the judge" in p.error for p in failed)


OUT_OF_MEMORY = '''
import torch
import torch.nn as nn
from foundry.kernels import c
lib = c.build("void noop(void) {}")
class ModelNew(nn.Module):
    def forward(self, x):
        lib.noop()
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 6.00 GiB")
'''


def test_a_worker_that_runs_out_of_device_memory_is_tried_again_once_and_then_judged(relu_task):
    """Another lane's work may have taken the memory: the first out-of-memory in the worker
    gives no verdict, the second try (the device's memory reserved whole) does."""
    cand = Candidate.make(task_id=relu_task.task_id, source=OUT_OF_MEMORY, backend="c")
    with Evaluator(config=EvalConfig.from_config({"device": "cpu"})) as ev:
        result = ev.evaluate(task=relu_task, candidate=cand)
    assert not result.correct and "evaluator_error" not in result.flags
    assert result.stage == int(Stage.RUNTIME) and "CUDA out of memory" in result.error
    assert "CUDA out of memory" in result.metrics["judge_out_of_memory_retried"]


OUT_OF_MEMORY_WHEN_TIMED = '''
import torch
import torch.nn as nn
from foundry.kernels import c
lib = c.build("void noop(void) {}")
CALLS = [0]
class ModelNew(nn.Module):
    def forward(self, x):
        lib.noop()
        CALLS[0] += 1
        if CALLS[0] > 12:  # past the trials and the repeat: the timed runs
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 7.00 GiB")
        return torch.relu(x)
'''


def test_timed_runs_that_run_out_of_device_memory_are_tried_again_and_then_say_why(relu_task):
    """Every trial came back correct, then the timed runs ran out of device memory: the
    evaluation is tried again with the device reserved whole, and its verdict names the
    error (not only 'the worker exited with code 0')."""
    cand = Candidate.make(task_id=relu_task.task_id, source=OUT_OF_MEMORY_WHEN_TIMED, backend="c")
    with Evaluator(config=EvalConfig.from_config({"device": "cpu", "allow_torch_ops": True})) as ev:
        result = ev.evaluate(task=relu_task, candidate=cand)
    assert not result.correct and result.stage == int(Stage.RUNTIME), result.error
    assert "its timed runs failed: torch.OutOfMemoryError: CUDA out of memory" in result.error
    assert "CUDA out of memory" in result.metrics["judge_out_of_memory_retried"]


def test_the_first_tries_tensors_are_gone_and_given_back_before_the_second_try(monkeypatch, relu_task):
    """On an H100, every evaluation of an 8 GiB-output task ran out of memory in its second
    try's timed runs beside a judge holding 49 GiB: the first try's three received outputs
    (kept alive by the except clause's traceback) and the second's. The retry runs outside
    the except clause: the first try's tensors are garbage by then, and the judge's blocks
    are given back (waiting for the shared section) before the wait for other lanes."""
    cand = Candidate.make(task_id=relu_task.task_id, source="# k", backend="c")
    ev = Evaluator(config=EvalConfig.from_config({"device": "cpu"}))
    received, seen = [], []

    def fake_evaluate(task, cand, t0, phases, whole_device=False):
        if not whole_device:
            output = torch.ones(4)  # a received output, held by this try's frame
            received.append(weakref.ref(output))
            raise WorkerOutOfMemory("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB")
        seen.append(("second try", received[0]() is None))
        return EvalResult(candidate_id=cand.candidate_id, task_id=task.task_id, stage=int(Stage.CORRECT),
                          correct=True, runtime_ms=1.0)
    monkeypatch.setattr(ev, "_evaluate", fake_evaluate)
    monkeypatch.setattr(ev, "_release_device_memory",
                        lambda wait=False: seen.append(("release", wait, received[0]() is None)))
    monkeypatch.setattr(ev.gate, "wait_for_reservations", lambda timeout_s: seen.append(("wait",)) or True)
    try:
        result = ev.evaluate(task=relu_task, candidate=cand)
    finally:
        ev.close()
    assert result.correct and "CUDA out of memory" in result.metrics["judge_out_of_memory_retried"]
    assert seen[:3] == [("release", True, True), ("wait",), ("second try", True)], seen


def _judge_with(monkeypatch, gate):
    """An Evaluator whose job is replaced: it records the gate's reserved bytes when its
    judge's memory is released and when its job runs."""
    ev = Evaluator(config=EvalConfig.from_config({"device": "cpu"}), gate=gate)
    seen = []
    monkeypatch.setattr(ev, "_release_device_memory",
                        lambda wait=False: seen.append(("release", wait, gate.snapshot()["reserved_bytes"])))

    def fake_run_and_judge(task, cand, t0, job, backend, f, ref_ops, phases, retry_out_of_memory=False):
        seen.append(("job", gate.snapshot()["reserved_bytes"]))
        return ev._result(task, cand, t0, Stage.RUNTIME, error="stand-in")
    monkeypatch.setattr(ev, "_run_and_judge", fake_run_and_judge)
    return ev, seen


def test_the_second_try_gives_back_what_the_judge_has_cached_once_it_holds_the_whole_device(monkeypatch, relu_task):
    """Another lane's blocks freed after their reservation ended (their release skipped
    during a timed section) are given back before the second try's worker runs."""
    from foundry.evaluate.device_gate import DeviceGate
    from foundry.evaluate.phases import PhaseTimes
    cand = Candidate.make(task_id=relu_task.task_id, source=OUT_OF_MEMORY, backend="c")
    ev, seen = _judge_with(monkeypatch, DeviceGate(capacity_bytes=100))
    try:
        ev._evaluate(relu_task, cand, time.monotonic(), PhaseTimes(), whole_device=True)
        second = list(seen)
        seen.clear()
        ev._evaluate(relu_task, cand, time.monotonic(), PhaseTimes())
    finally:
        ev.close()
    assert second == [("release", True, 100), ("job", 100)]
    assert seen == [("job", 0)]  # a first try releases after its job, as before


def test_a_waited_release_runs_in_a_shared_section_after_another_lanes_timed_section(monkeypatch, relu_task):
    import foundry.evaluate.evaluator as evaluator
    from foundry.evaluate.device_gate import DeviceGate
    gate = DeviceGate()
    ev = Evaluator(config=EvalConfig.from_config({"device": "cpu"}), gate=gate)
    ev.config = ev.config.replace(device="cuda")  # its release is device work now (faked below)
    timing, timed = threading.Event(), threading.Event()
    seen = []
    monkeypatch.setattr(evaluator, "release", lambda g: seen.append((timed.is_set(), g._shared)))

    def other_lane():
        with gate.exclusive():
            timing.set()
            time.sleep(0.3)
            timed.set()
    lane = threading.Thread(target=other_lane)
    lane.start()
    try:
        timing.wait()
        ev._release_device_memory(wait=True)
    finally:
        lane.join()
        ev.close()
    assert seen == [(True, 1)]  # after the timed section, inside a shared section of its own


def test_a_worker_out_of_memory_lets_go_of_the_outputs_received_before_it_is_raised(monkeypatch, relu_task):
    from foundry.evaluate.backends import get_backend
    from foundry.evaluate.phases import PhaseTimes
    from foundry.evaluate.sandbox import JobOutcome, Message
    from foundry.evaluate.verdict import Findings
    cand = Candidate.make(task_id=relu_task.task_id, source=OUT_OF_MEMORY, backend="c")
    ev = Evaluator(config=EvalConfig.from_config({"device": "cpu"}))
    try:
        backend = get_backend("c")
        job = ev._candidate_job(relu_task, cand, backend)
        error = "Traceback ...\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB"
        out = JobOutcome(messages=[Message({"kind": "compiled"}, [], 0.0),
                                   *(Message({"kind": "trial", "index": i}, [torch.ones(4)], 0.1)
                                     for i in range(len(job.trials))),
                                   Message({"kind": "repeat", "index": 0}, [torch.ones(4)], 0.2),
                                   Message({"kind": "error", "phase": "timing", "out_of_memory": True,
                                            "error": error}, [], 0.3)])
        monkeypatch.setattr(ev, "_run", lambda job, **kw: out)
        with pytest.raises(WorkerOutOfMemory, match="Tried to allocate 8.00 GiB"):
            ev._run_and_judge(relu_task, cand, 0.0, job, backend, Findings(), frozenset(), PhaseTimes(),
                              retry_out_of_memory=True)
    finally:
        ev.close()
    assert all(m.tensors == [] for m in out.messages)


DIES_WHEN_TIMED = OUT_OF_MEMORY_WHEN_TIMED.replace(
    'torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 7.00 GiB")', 'RuntimeError("timed runs broke")')


def test_the_outputs_decoded_for_a_job_whose_timed_runs_failed_are_gone_when_the_judge_releases(
        monkeypatch, relu_task):
    """Where the timed-runs check never ran (release_judged_trials did not), the trials'
    decoded outputs stayed in the Findings past the judge's release in its shared section
    and its reservation: on the GPU, cached in the judge while the next worker ran."""
    import foundry.evaluate.evaluator as evaluator
    cand = Candidate.make(task_id=relu_task.task_id, source=DIES_WHEN_TIMED, backend="c")
    decoded, alive_at_release = [], []
    real = evaluator.judge_outputs

    def judge_outputs(f, *args, **kwargs):
        real(f, *args, **kwargs)
        decoded.extend(weakref.ref(t) for t in f.candidate_outputs.values())
    monkeypatch.setattr(evaluator, "judge_outputs", judge_outputs)
    with Evaluator(config=EvalConfig.from_config({"device": "cpu", "allow_torch_ops": True})) as ev:
        monkeypatch.setattr(ev, "_release_device_memory",
                            lambda wait=False: alive_at_release.append(sum(r() is not None for r in decoded)))
        result = ev.evaluate(task=relu_task, candidate=cand)
    assert "its timed runs failed: RuntimeError: timed runs broke" in result.error, result.error
    assert decoded and alive_at_release[0] == 0


def test_a_screens_second_attempt_does_not_find_the_firsts_tensors_alive(monkeypatch, relu_task):
    cand = Candidate.make(task_id=relu_task.task_id, source=MODES, backend="c")
    points = [{"MODE": 0}, {"MODE": 1}]
    ev = Evaluator(config=EvalConfig.from_config({"device": "cpu"}))
    held, seen = [], []

    def screen_job(task, candidate, points, backend, ref_ops):
        if not held:
            reference = torch.ones(4)  # the first attempt's reference output, held by its frame
            held.append(weakref.ref(reference))
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB")
        seen.append(held[0]() is None)
        return refused(points, "stand-in")
    monkeypatch.setattr(ev, "_screen_job", screen_job)
    try:
        ev.screen(task=relu_task, candidate=cand, points=points)
    finally:
        ev.close()
    assert seen == [True]
