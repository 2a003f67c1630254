"""The judge's typed job, its per-phase breakdown, and one-job screening of TUNABLE points
(on the CPU, `c` backend)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from foundry.evaluate import EvalConfig, Evaluator, protocol
from foundry.evaluate.job import CandidateSpec, Job, JobError, TaskSpec, TimingSpec, TrialSpec
from foundry.tasks import load_task
from foundry.tuning import Tuner, TunerConfig
from foundry.types import Candidate

ROOT = Path(__file__).resolve().parents[2]
HONEST = (ROOT / "tests" / "exploits" / "candidates" / "honest_relu_c.py").read_text()
# MODE picks the kernel: right, wrong (negatives pass through), or right but slower
MODES = HONEST.replace('TUNABLE = {"UNUSED": [1, 2]}\nPARAMS = {"UNUSED": 1}',
                       'TUNABLE = {"MODE": [0, 1, 2]}\nPARAMS = {"MODE": 0}').replace(
    """void relu_kernel(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0.f ? x[i] : 0.f;
}""", """void relu_kernel(const float* x, float* y, int64_t n, int64_t mode) {
    for (int64_t r = 0; r < (mode == 2 ? 400 : 1); r++)
        for (int64_t i = 0; i < n; i++) y[i] = (mode == 1 || x[i] > 0.f) ? x[i] : 0.f;
}""").replace("self.lib.relu_kernel(x, y, x.numel())", "self.lib.relu_kernel(x, y, x.numel(), PARAMS['MODE'])")


@pytest.fixture(scope="module")
def relu():
    return load_task(ROOT / "benchmarks" / "smoke" / "relu.py")


@pytest.fixture(scope="module")
def ev(tmp_path_factory):
    e = Evaluator(config=EvalConfig.from_config({
        "trials": 3, "timeout_s": 30, "compile_baseline": False, "timing_min_ms": 30,
        "baseline_cache_dir": str(tmp_path_factory.mktemp("baselines"))}))
    yield e
    e.close()


def _job(**kw) -> Job:
    base = dict(kind="candidate", device="cpu", threads=1, task=TaskSpec("t", "/t.py", "src", {"N": 4}),
                variants=({},), init_seed=7, trials=(TrialSpec(1, "standard", 0), TrialSpec(2, "heavy", 0)),
                timing=TimingSpec(sets=(0, 1), params={"min_ms": 1.0}),
                candidate=CandidateSpec(source="x = 1", backend="c", params={"B": 64}, launch_key="c"))
    base.update(kw)
    return Job(**base)


def test_a_job_crosses_the_pipe_typed_and_intact():
    job = _job()
    r, w = os.pipe()
    try:
        protocol.write_job(w, job)
        os.close(w)
        w = -1
        assert protocol.read_job(r) == job
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)
    assert job.main_trials == [0, 1]


def test_malformed_jobs_fail_with_a_reason():
    with pytest.raises(JobError, match="kind"):
        _job(kind="exploit")
    with pytest.raises(JobError, match="variant"):
        _job(trials=(TrialSpec(1, "standard", 3),))
    with pytest.raises(JobError, match="malformed"):
        Job.from_json(b'{"kind": "candidate"}')
    with pytest.raises(JobError, match="points"):
        _job(kind="screen")


def test_an_evaluation_reports_where_its_time_went(ev, relu):
    r = ev.evaluate(task=relu, candidate=Candidate.make(task_id=relu.task_id, source=HONEST, backend="c"))
    assert r.correct, r.error
    phases = r.metrics["phases"]
    for name in ("static_checks", "worker_start", "build", "trials", "timing", "references", "compare"):
        assert phases.get(name, 0) > 0, (name, phases)
    shown = sum(phases.values())  # the phases do not overlap: they add up to the evaluation
    assert 0.6 * r.eval_s <= shown <= 1.05 * r.eval_s, (shown, r.eval_s, phases)
    parts = r.metrics["worker_start_parts_s"]
    assert set(parts) == {"device_setup_s", "inputs_s"} and sum(parts.values()) <= phases["worker_start"]


def test_screening_builds_checks_and_times_every_point_in_one_job(ev, relu):
    cand = Candidate.make(task_id=relu.task_id, source=MODES, backend="c")
    points = [{"MODE": 0}, {"MODE": 1}, {"MODE": 2}, {"MODE": "oops"}]
    screened = ev.screen(task=relu, candidate=cand, points=points)
    assert [p.params for p in screened] == points
    right, wrong, slow, broken = screened
    assert right.ok and right.runtime_ms > 0, right
    assert not wrong.ok and "max abs error" in wrong.error, wrong
    assert slow.ok and slow.runtime_ms > 3 * right.runtime_ms, (slow, right)
    assert not broken.ok and "TypeError" in broken.error, broken
    # each point's own seconds, on the judge's clock: every point is built and run first,
    # then the points that ran are timed one after another in one hold of the device
    built = {"load_s", "construct_s", "inputs_s", "run_s"}  # the worker's own split of a point that ran
    assert set(right.seconds) == {"build_trial_s", "device_wait_s", "timing_s"} | built, right.seconds
    assert set(wrong.seconds) == set(slow.seconds) == {"build_trial_s", "timing_s"} | built, (wrong.seconds,
                                                                                              slow.seconds)
    assert set(broken.seconds) == {"build_trial_s"}
    assert all(s >= 0 for p in screened for s in p.seconds.values())
    assert sum(right.seconds[name] for name in built) <= right.seconds["build_trial_s"] + 0.05
    assert slow.seconds["timing_s"] > 0


def test_a_screened_tuning_costs_one_screen_and_one_full_evaluation(ev, relu):
    cand = Candidate.make(task_id=relu.task_id, source=MODES, backend="c", params={"MODE": 2})
    full: list = []

    def measure(c):
        full.append(c.params)
        return ev.evaluate(task=relu, candidate=c)

    screens: list = []

    def screen(c, settings):
        screens.append(list(settings))
        return ev.screen(task=relu, candidate=c, points=settings)

    tuned = Tuner(config=TunerConfig(budget=8)).tune(task=relu, candidate=cand, measure=measure, device="cpu",
                                                     screen=screen)
    assert len(screens) == 1 and len(screens[0]) == 3
    assert full == [{"MODE": 0}], full  # the fastest correct setting, judged in full once
    assert tuned.result.correct and tuned.candidate.params == {"MODE": 0}
    assert tuned.result.metrics["tuning_status"] == "screened"
    assert sum(r.correct for r in tuned.records) == 2
    parts = tuned.result.metrics["tuning_parts_s"]
    assert parts["screen_points"] == 3 and parts["finalists"] == 1
    assert parts["finalists_s"] == pytest.approx(tuned.result.eval_s, abs=1e-3)
    assert 0 < parts["screen_build_trial_s"] + parts["screen_timing_s"] <= parts["screen_s"]


def test_a_task_too_large_for_the_judge_fails_naming_itself_and_its_sizes(ev, tmp_path):
    path = tmp_path / "huge_relu.py"
    path.write_text((ROOT / "benchmarks" / "smoke" / "relu.py").read_text()
                    .replace("batch_size = 16\n", "batch_size = 1 << 20\n").replace("SMALL_SIZES", "_UNUSED"))
    task = load_task(path)  # 1M x 16384 fp32: 64 GiB per input, sized on the meta device only
    r = ev.evaluate(task=task, candidate=Candidate.make(task_id=task.task_id, source=HONEST, backend="c"))
    assert not r.correct and "task_error" in r.flags and "task_too_large" in r.flags
    assert "huge_relu" in r.error and "68.72 GB" in r.error and "host memory" in r.error, r.error
    assert r.eval_s < 5
    again = ev.screen(task=task, candidate=Candidate.make(task_id=task.task_id, source=MODES, backend="c"),
                      points=[{"MODE": 0}, {"MODE": 2}])
    assert not any(p.ok for p in again) and "too large" in again[0].error


def test_a_workers_split_of_a_point_keeps_only_known_plain_numbers():
    from foundry.evaluate.screening import worker_parts
    assert worker_parts({"load_s": 0.5, "run_s": 2, "inputs_s": -1.0, "construct_s": True, "rogue_s": 1.0}) == \
        {"load_s": 0.5, "run_s": 2.0}
    assert worker_parts("load_s=1") == {} and worker_parts(None) == {}
