"""A task's degeneracy verdict is known before its first job is planned (its
differential inputs decide the job's paired trials, and the memory estimate counts
them); where the check cannot run, the first evaluation's reference outputs decide."""

from __future__ import annotations

from pathlib import Path

import torch

from foundry.evaluate.config import EvalConfig
from foundry.evaluate.device import get_device
from foundry.evaluate.phases import PhaseTimes
from foundry.evaluate.reference import ReferenceRunner
from foundry.evaluate.task_setup import TaskSetup
from foundry.tasks import load_task
from foundry.tasks.degeneracy import DegeneracyCheckError

ROOT = Path(__file__).resolve().parents[2]
CROSS_ENTROPY = ROOT / "tests" / "exploits" / "tasks" / "cross_entropy.py"


def _setup(tmp_path: Path) -> TaskSetup:
    return TaskSetup(config=EvalConfig(baseline_cache_dir=str(tmp_path)), reference=ReferenceRunner(get_device("cpu")))


def test_the_verdict_comes_before_the_job_and_the_estimate_counts_the_paired_trial(tmp_path):
    task = load_task(CROSS_ENTROPY)
    setup = _setup(tmp_path)
    setup.reference_ops(task)
    before = setup.evaluation_bytes(task)
    phases = PhaseTimes()
    verdict = setup.degeneracy_before(task, atol=task.atol, rtol=task.rtol, phases=phases)
    assert verdict is not None and not verdict.degenerate and verdict.differential_inputs == (1,)
    assert phases.seconds.get("degeneracy", 0) > 0
    in_b, _ = setup.size_of(task)
    assert setup.evaluation_bytes(task) - before >= in_b  # one more full-size trial's inputs
    assert setup.degeneracy(task, [], atol=task.atol, rtol=task.rtol) is verdict  # after the job: the same
    again = PhaseTimes()
    assert setup.degeneracy_before(task, atol=task.atol, rtol=task.rtol, phases=again) is verdict
    assert "degeneracy" not in again.seconds  # known: nothing runs
    other = _setup(tmp_path)  # another lane reads the disk cache
    assert other.degeneracy_before(task, atol=task.atol, rtol=task.rtol).cached


def test_where_the_check_cannot_run_the_reference_outputs_decide(tmp_path, monkeypatch):
    import foundry.evaluate.task_setup as module

    def out_of_memory(*a, **k):
        raise DegeneracyCheckError("the degeneracy check ran out of memory")
    monkeypatch.setattr(module, "judge_degeneracy", out_of_memory)
    task = load_task(CROSS_ENTROPY)
    setup = _setup(tmp_path)
    assert setup.degeneracy_before(task, atol=task.atol, rtol=task.rtol) is None
    same = [torch.ones(3), torch.ones(3)]
    verdict = setup.degeneracy(task, same, atol=task.atol, rtol=task.rtol)
    assert verdict.degenerate and "does not depend on the inputs" in verdict.reason
    assert setup.degeneracy(task, [torch.ones(3), torch.zeros(3)], atol=task.atol, rtol=task.rtol) is verdict


def test_on_a_gpu_judge_the_check_reserves_its_own_estimate_and_gives_its_blocks_back(tmp_path, monkeypatch):
    import foundry.evaluate.task_setup as module
    from foundry.evaluate.degeneracy import Degeneracy
    from foundry.evaluate.task_size import TaskSize

    task = load_task(CROSS_ENTROPY)
    setup = TaskSetup(config=EvalConfig(device="cuda", baseline_cache_dir=str(tmp_path)), reference=None)
    setup._check_fits = lambda task, size: None  # noqa: E731 - no GPU here to size against
    size = TaskSize(input_bytes=6 << 30, output_bytes=1 << 30)
    setup._size[task.source_hash] = (size, 2)
    held: list = []
    released: list = []

    class Gate(type(setup.gate)):
        def memory(self, nbytes):
            held.append(nbytes)
            return super().memory(nbytes)
    setup.gate = Gate()
    monkeypatch.setattr(module, "judge_degeneracy", lambda *a, **k: Degeneracy(False))
    monkeypatch.setattr(module, "release", lambda gate: released.append(gate._reserved))
    assert setup.degeneracy_before(task, atol=task.atol, rtol=task.rtol) is not None
    assert held == [size.degeneracy_bytes(trials=3)] and held[0] < setup.evaluation_bytes(task)
    assert released == [held[0]]  # given back while the reservation still counted it
