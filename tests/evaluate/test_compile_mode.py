"""The torch.compile baseline's mode: carried by the baseline job, and a cache key of its own;
and the timing protocol in every key (times measured under another are measured again)."""

from __future__ import annotations

from foundry.evaluate.baselines import TIMING_PROTOCOL, baseline_key
from foundry.evaluate.job import Job, TaskSpec, TrialSpec
from foundry.types import Task, content_hash

import torch


def _task() -> Task:
    return Task(task_id="t", path="/t.py", source="x = 1")


def test_each_mode_and_each_timing_protocol_has_its_own_key():
    keys = {mode: baseline_key(_task(), device="cuda", hardware="H200", threads=1, compile_mode=mode)
            for mode in ("default", "max-autotune", "reduce-overhead")}
    assert len(set(keys.values())) == 3
    assert keys["default"] == baseline_key(_task(), device="cuda", hardware="H200", threads=1)
    before = content_hash("x = 1", "{}", "cuda", "H200", "1", torch.__version__)  # the key before protocol 2
    older = {content_hash("x = 1", "{}", "cuda", "H200", "1", torch.__version__, f"timing protocol {n}")
             for n in (2, 3, 4, 5, 6)}
    assert TIMING_PROTOCOL == 7 and not ({before} | older) & set(keys.values())


def test_the_baseline_job_carries_the_mode():
    job = Job(kind="baseline", device="cuda", threads=1, task=TaskSpec("t", "/t.py", "x = 1"), variants=({},),
              init_seed=1, trials=(TrialSpec(1, "standard", 0),), compile_baseline=True, compile_mode="max-autotune")
    again = Job.from_json(job.to_json())
    assert again == job and again.compile_mode == "max-autotune"
    older = job.to_json().replace(b', "compile_mode": "max-autotune"', b"")
    assert Job.from_json(older).compile_mode == "default"
