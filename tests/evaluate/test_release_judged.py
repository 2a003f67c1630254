"""After the trials are judged, the judge keeps only what the timed-runs check needs."""

import torch

from foundry.evaluate.config import EvalConfig
from foundry.evaluate.correctness import release_judged_trials
from foundry.evaluate.job import CandidateSpec, Job, TaskSpec
from foundry.evaluate.job_plan import timing_spec, trials_for
from foundry.evaluate.sandbox import JobOutcome, Message
from foundry.evaluate.verdict import Findings
from foundry.types import Task


def _job(trials: int) -> Job:
    cfg = EvalConfig(trials=trials)
    plan = trials_for(Task(task_id="t", path="/t.py", source="x = 1"), cfg, large=False, base=3, redraw=(0,))
    return Job(kind="candidate", device="cpu", threads=1, task=TaskSpec("t", "/t.py", "x = 1"), variants=({},),
               init_seed=1, trials=plan, timing=timing_spec(cfg, plan), candidate=CandidateSpec(source="x", backend="c"))


def test_trials_and_repeat_outputs_go_timed_outputs_and_timed_references_stay():
    job = _job(5)
    n = len(job.trials)
    assert n == 6 and job.timing.sets == (0, 1, 2)  # five trials and one paired trial; three timed sets
    t = lambda: torch.ones(4)  # noqa: E731
    out = JobOutcome(messages=[*(Message({"kind": "trial", "index": i}, [t()], 0.0) for i in range(n)),
                               Message({"kind": "repeat"}, [t()], 0.1),
                               Message({"kind": "timing"}, [t(), t(), t()], 0.2),
                               Message({"kind": "timing_end"}, [], 0.3)])
    f = Findings()
    f.candidate_outputs.update({i: t() for i in range(n)})
    references = {i: t() for i in range(n)}
    release_judged_trials(f, out, job, references)
    assert f.candidate_outputs == {}
    assert all(m.tensors == [] for m in out.of_kind("trial") + out.of_kind("repeat"))
    assert len(out.of_kind("timing")[0].tensors) == 3
    assert sorted(references) == [0, 1, 2]


def test_drop_tensors_of_all_kinds_by_default():
    out = JobOutcome(messages=[Message({"kind": "trial", "index": 0}, [torch.ones(2)], 0.0),
                               Message({"kind": "timing"}, [torch.ones(2)], 0.1)])
    out.drop_tensors(kinds=("timing",))
    assert len(out.messages[0].tensors) == 1 and out.messages[1].tensors == []
    out.drop_tensors()
    assert out.messages[0].tensors == []
