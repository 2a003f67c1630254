"""The device profiler's view of a trial goes into a result's metrics as "kernels"."""

from foundry.evaluate.job_metrics import kernel_profile
from foundry.evaluate.sandbox import JobOutcome, Message


def test_the_profiled_trial_gives_the_kernels_and_their_times():
    profiled = {"own_kernels": 2, "own_time_fraction": 0.9, "kernels": ["k"], "kernel_note": "",
                "kernel_times_us": [["k", 12.5, 2]]}
    out = JobOutcome(messages=[Message({"kind": "trial", "index": 0, "profiled": profiled}, [], 0.0),
                               Message({"kind": "trial", "index": 1}, [], 0.1)])
    assert kernel_profile(out) == {"own_kernels": 2, "own_time_fraction": 0.9, "kernel_times_us": [["k", 12.5, 2]]}


def test_no_profiled_trial_no_kernels():
    out = JobOutcome(messages=[Message({"kind": "trial", "index": 0, "profiled": "not a report"}, [], 0.0)])
    assert kernel_profile(out) is None
