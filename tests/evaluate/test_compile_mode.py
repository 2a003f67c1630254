"""The torch.compile baseline's mode: carried by the baseline job, and a cache key of its own
(the default mode keeps the key it always had, so caches made before stay valid)."""

from __future__ import annotations

from foundry.evaluate.baselines import baseline_key
from foundry.evaluate.job import Job, TaskSpec, TrialSpec
from foundry.types import Task, content_hash

import torch


def _task() -> Task:
    return Task(task_id="t", path="/t.py", source="x = 1")


def test_each_mode_has_its_own_key_and_the_default_keeps_the_old_one():
    keys = {mode: baseline_key(_task(), device="cuda", hardware="H200", threads=1, compile_mode=mode)
            for mode in ("default", "max-autotune", "reduce-overhead")}
    assert len(set(keys.values())) == 3
    old = content_hash("x = 1", "{}", "cuda", "H200", "1", torch.__version__)
    assert keys["default"] == old == baseline_key(_task(), device="cuda", hardware="H200", threads=1)


def test_the_baseline_job_carries_the_mode():
    job = Job(kind="baseline", device="cuda", threads=1, task=TaskSpec("t", "/t.py", "x = 1"), variants=({},),
              init_seed=1, trials=(TrialSpec(1, "standard", 0),), compile_baseline=True, compile_mode="max-autotune")
    again = Job.from_json(job.to_json())
    assert again == job and again.compile_mode == "max-autotune"
    older = job.to_json().replace(b', "compile_mode": "max-autotune"', b"")
    assert Job.from_json(older).compile_mode == "default"
