"""The worker's side of a screen (foundry.evaluate.screen_run) within its budget: a
setting whose prebuild ran past the job's build budget is reported and never built,
and a prebuilt setting whose trial ran far slower than the fastest is reported and not
timed. Run with a stand-in worker: the prebuild itself is tested in test_triton_prebuild."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from foundry.evaluate import screen_run
from foundry.evaluate.triton_prebuild import PrebuildReport


class StandInWorker:
    """Records what run_screen asks of a harness.Worker; point k's trial takes
    `trial_s[k]` seconds on its clock."""

    def __init__(self, points: list, trial_s: list):
        self.job = SimpleNamespace(points=tuple(points), prebuild_timeout_s=60.0,
                                   timing=SimpleNamespace(sets=(0,)), candidate=SimpleNamespace(record_ops=False))
        self.trials = [{"inputs": None}]
        self.trial_s = trial_s
        self.now = 0
        self.sent: list = []
        self.loaded: list = []
        self.timed: list = []
        self.runs: list = []

    def clock(self) -> int:
        return self.now

    def send(self, header, tensors=None):
        self.sent.append(header)

    def load_candidate(self, params):
        self.loaded.append(params["k"])
        return SimpleNamespace(ModelNew=params["k"])

    def construct(self, k):
        return [k]

    def fresh_inputs(self, i):
        return [torch.ones(2)]

    def run_trial(self, k, inputs, record=False):
        """Point k's first run takes trial_s[k] (or its first of two) seconds, a second run
        the same (or its second)."""
        times = self.trial_s[k] if isinstance(self.trial_s[k], tuple) else (self.trial_s[k],) * 2
        self.runs.append(k)
        self.now += int(times[min(1, self.runs.count(k) - 1)] * 1e9)
        return torch.ones(2), {}

    def wait_go(self):
        return True

    def time_model(self, k, timing, **kw):
        self.timed.append(k)


def _screen(monkeypatch, trial_s, report):
    worker = StandInWorker([{"k": k} for k in range(len(trial_s))], trial_s)
    monkeypatch.setattr(screen_run, "prebuild_points", lambda w: report)
    screen_run.run_screen(worker)
    errors = {h["point"]: h["error"] for h in worker.sent if h["kind"] == "screen_error"}
    return worker, errors


def test_a_setting_past_the_build_budget_is_reported_and_never_built(monkeypatch):
    report = PrebuildReport(built=(True, False, True), wall_s=60.0, timed_out=(False, True, False))
    worker, errors = _screen(monkeypatch, [0.1, 0.1, 0.1], report)
    assert worker.loaded == [0, 2] and worker.timed == [0, 2]
    assert set(errors) == {1} and "build budget of 60 s" in errors[1] and "screen_build_s" in errors[1]


def test_a_prebuilt_setting_far_slower_than_the_fastest_is_not_timed(monkeypatch):
    report = PrebuildReport(built=(True, True, True, False), wall_s=5.0, timed_out=(False,) * 4)
    # point 3 was not prebuilt: its trial includes its compile, so it is not judged slow by it
    worker, errors = _screen(monkeypatch, [0.2, 1.5, 0.5, 9.0], report)
    assert worker.timed == [0, 2, 3]
    assert set(errors) == {1} and "7.5x the fastest" in errors[1]
    trials = [h["point"] for h in worker.sent if h["kind"] == "screen_trial"]
    assert trials == [0, 1, 2, 3]  # every output still went to the judge to be checked


def test_a_slow_first_launch_is_run_again_before_it_counts(monkeypatch):
    # the first point's first launch loads its kernels and builds Triton's launcher: 0.67 s
    # for a kernel of microseconds (seen on an H200); its second run says what it costs
    report = PrebuildReport(built=(True, True, True), wall_s=5.0, timed_out=(False,) * 3)
    worker, errors = _screen(monkeypatch, [(0.67, 0.003), 0.004, (2.0, 1.9)], report)
    assert errors.keys() == {2} and worker.timed == [0, 1]
    assert worker.runs == [0, 0, 1, 2, 2]  # only trials over the floor ran twice


def test_without_a_prebuild_every_setting_that_ran_is_timed(monkeypatch):
    worker, errors = _screen(monkeypatch, [0.1, 5.0], None)
    assert worker.timed == [0, 1] and errors == {}


def test_short_trials_are_all_timed_however_their_ratio():
    assert screen_run.too_slow({0: 0.01, 1: 0.2}) == {}  # under the floor: timing them is cheap
    assert set(screen_run.too_slow({0: 0.1, 1: 0.31, 2: 0.29})) == {1}
