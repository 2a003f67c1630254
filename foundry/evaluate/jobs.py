"""The three kinds of sandbox job the judge runs, built from a task, a candidate and the
judge's config (pure functions; job_plan.py plans their trials, sizes and timing):

- a candidate job: the candidate's trials, repeat and timed runs (`candidate_job`);
- a screen job: one trial and a short timing per setting of the candidate's TUNABLE
  (`screen_job`);
- a baseline job: the reference's eager and torch.compile times (`baseline_job`);

and the compiler caches each kind of job may use (`compiler_caches`).
"""

from __future__ import annotations

from foundry.evaluate.backends import BackendSpec
from foundry.evaluate.config import EvalConfig
from foundry.evaluate.job import CandidateSpec, Job, TaskSpec, TimingSpec, TrialSpec
from foundry.evaluate.job_plan import (TIMING_SETS, init_seed_for, is_large, screen_timing, timing_spec, trials_for,
                                       variants_for)
from foundry.kernels import cache_dir
from foundry.tasks.inputs import trial_plan
from foundry.types import Candidate, Task

BASELINE_SEED = 20240601


def task_spec(task: Task) -> TaskSpec:
    return TaskSpec(task_id=task.task_id, path=task.path, source=task.source,
                    overrides=dict(task.size_overrides))


def candidate_spec(cand: Candidate, backend: BackendSpec, config: EvalConfig) -> CandidateSpec:
    return CandidateSpec(source=cand.source, backend=backend.name, params=dict(cand.params),
                         launch_key=backend.launch_key, worker_setup=backend.worker_setup,
                         record_ops=not config.allow_torch_ops)


def backend_timing(config: EvalConfig, trials: tuple, backend: BackendSpec | None, *,
                   sets: int = TIMING_SETS) -> TimingSpec:
    """The timing spec of `trials` for `backend` (None: the reference's own baseline), on
    at most `sets` input sets."""
    interpreter = backend is not None and backend.name == "triton" and config.device == "cpu"
    return timing_spec(config, trials, interpreter=interpreter, sets=sets)


def candidate_job(task: Task, cand: Candidate, backend: BackendSpec, config: EvalConfig, *,
                  sizes: tuple[int, int], base: int, redraw: tuple = (), timing_sets: int = TIMING_SETS) -> Job:
    """`sizes`: (input bytes, output bytes) of one trial at the task's own size; `base`:
    the trials' base seed; `redraw`: the task's differential inputs (one paired trial each);
    `timing_sets`: how many input sets the candidate is timed on, at most."""
    large = is_large(sizes, config)
    trials = trials_for(task, config, large=large, base=base, redraw=redraw)
    return Job(kind="candidate", device=config.device, threads=config.threads, task=task_spec(task),
               variants=variants_for(task, config, large=large), init_seed=init_seed_for(base),
               trials=trials, timing=backend_timing(config, trials, backend, sets=timing_sets),
               candidate=candidate_spec(cand, backend, config))


def screen_job(task: Task, cand: Candidate, backend: BackendSpec, config: EvalConfig, *,
               points: tuple, base: int) -> Job:
    """One trial at the task's size and a screen's short timing for every setting in `points`."""
    trial = trial_plan(1, base)[0]
    trials = (TrialSpec(trial.seed, trial.distribution, 0),)
    return Job(kind="screen", device=config.device, threads=config.threads, task=task_spec(task),
               variants=({},), init_seed=init_seed_for(base), trials=trials,
               timing=screen_timing(backend_timing(config, trials, backend)),
               candidate=candidate_spec(cand, backend, config), points=points,
               prebuild_workers=int(config.screen_prebuild_workers),
               prebuild_timeout_s=float(config.screen_build_s))


def baseline_job(task: Task, config: EvalConfig) -> Job:
    """The reference timed eager (and, where configured, under torch.compile) on fixed seeds."""
    trials = tuple(TrialSpec(s.seed, "standard", 0) for s in trial_plan(TIMING_SETS, BASELINE_SEED))
    return Job(kind="baseline", device=config.device, threads=config.threads, task=task_spec(task),
               variants=({},), init_seed=BASELINE_SEED, trials=trials, timing=backend_timing(config, trials, None),
               compile_baseline=config.compile_baseline, compile_mode=config.compile_mode)


def compiler_caches(*, trusted: bool) -> dict[str, str]:
    """Persistent compiler caches for a job: candidates share Triton's cache among
    themselves (a build cache they may write, keyed by what it builds); baselines
    (torch.compile) use caches of their own that no candidate can write when isolated."""
    if not trusted:
        return {"TRITON_CACHE_DIR": str(cache_dir("triton"))}
    return {"TRITON_CACHE_DIR": str(cache_dir("baseline-triton")),
            "TORCHINDUCTOR_CACHE_DIR": str(cache_dir("baseline-inductor"))}
