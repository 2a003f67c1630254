"""Planning a sandbox job from a task and the judge's config: which trials run at which
sizes, the timing spec, and the host-memory caps the job runs under (pure functions)."""

from __future__ import annotations

from foundry.evaluate.config import EvalConfig
from foundry.evaluate.job import Job, TimingSpec, TrialSpec
from foundry.evaluate.trial_inputs import small_sizes
from foundry.tasks.inputs import trial_plan
from foundry.types import Task

TIMING_SETS = 3
MIB = 1 << 20
SCREEN_MIN_MS, SCREEN_MIN_CALLS, SCREEN_WARMUP_MS = 40.0, 5, 10.0
REDRAW_STRIDE = 104729  # a paired trial's redrawn input: seed of trial 0 plus this per input


def is_large(sizes: tuple[int, int], config: EvalConfig) -> bool:
    """`sizes`: (input bytes, output bytes) of one trial at the task's own size."""
    return sum(sizes) > config.large_task_mb * MIB


def variants_for(task: Task, config: EvalConfig, *, large: bool) -> tuple:
    """Overrides per variant: 0 the task's own sizes, then its shape variants, then (for
    a large task) its SMALL_SIZES, where the trials beyond `full_size_trials` run."""
    variants = [{}] + (list(task.variants) if config.check_variants else [])
    if large and config.trials > config.full_size_trials:
        small = small_sizes(task)
        if small:
            variants.append(small)
    return tuple(variants)


def trials_for(task: Task, config: EvalConfig, *, large: bool, base: int, redraw: tuple = ()) -> tuple:
    """Trials: `trials` at the task's size (at most `full_size_trials` of them for a large
    task: one standard and one heavy-tailed, so 'different inputs, different answers'
    still holds there; the rest run at SMALL_SIZES), two per shape variant, then one
    paired trial per input index in `redraw` (the task's differential inputs): trial 0's
    inputs with that one redrawn (`paired_trial`)."""
    n_full = min(config.trials, config.full_size_trials) if large else config.trials
    plan = [TrialSpec(s.seed, s.distribution, 0) for s in trial_plan(n_full, base)]
    n_shape = len(task.variants) if config.check_variants else 0
    for v in range(1, n_shape + 1):
        plan += [TrialSpec(s.seed, s.distribution, v) for s in trial_plan(2, base + 1000003 * v)]
    variants = variants_for(task, config, large=large)
    if len(variants) > 1 + n_shape:  # the SMALL_SIZES variant of a large task
        plan += [TrialSpec(s.seed, s.distribution, len(variants) - 1)
                 for s in trial_plan(config.trials - n_full, base + 7777771)]
    plan += [paired_trial(plan[0], i) for i in redraw]
    return tuple(plan)


def paired_trial(trial: TrialSpec, index: int) -> TrialSpec:
    """`trial`'s inputs with input `index` redrawn from a seed of its own."""
    return TrialSpec(trial.seed, trial.distribution, trial.variant, redraw=int(index),
                     redraw_seed=(trial.seed + REDRAW_STRIDE * (int(index) + 1)) % (2**62))


def init_seed_for(base: int) -> int:
    """The seed of the models' parameters, derived from the trials' base seed."""
    return (base * 31 + 17) % (2**62)


def timing_spec(config: EvalConfig, trials: tuple, *, interpreter: bool = False,
                sets: int = TIMING_SETS) -> TimingSpec:
    """Timing on the first `sets` (at most TIMING_SETS) trials at the task's own size.
    `interpreter`: Triton's interpreter on the CPU (correct, but far too slow for the real
    protocol)."""
    params = {"warmup_ms": config.warmup_ms, "min_ms": config.timing_min_ms,
              "min_calls": config.timing_min_calls, "max_calls": config.timing_max_calls,
              "block_ms": config.timing_block_ms, "tf32": config.tf32}
    if interpreter:
        params.update(min_calls=min(5, config.timing_min_calls), min_ms=min(50.0, config.timing_min_ms),
                      warmup_ms=0.0)
    main = [i for i, t in enumerate(trials) if t.variant == 0 and not t.paired]
    return TimingSpec(sets=tuple(main[:max(1, min(int(sets), TIMING_SETS))]), params=params)


def screen_timing(full: TimingSpec) -> TimingSpec:
    """A screened point's timing: the same protocol (events, L2 flush, blocks, median) on
    one input set over a shorter window; only finalists are timed in full."""
    p = dict(full.params)
    p.update(min_ms=min(float(p["min_ms"]), SCREEN_MIN_MS), min_calls=min(int(p["min_calls"]), SCREEN_MIN_CALLS),
             warmup_ms=min(float(p["warmup_ms"]), SCREEN_WARMUP_MS))
    return TimingSpec(sets=full.sets[:1], params=p)


def memory_caps(config: EvalConfig, sizes: tuple[int, int], job: Job) -> tuple[int, int]:
    """(host-memory cap in MB, result-channel cap in bytes) for `job`: the configured cap
    (the worker's own allowance) plus the host memory the job's trials need for the
    task's data."""
    in_b, out_b = sizes
    full = sum(1 for t in job.trials if t.variant == 0)
    sets = len(job.timing.sets) if job.timing else 0
    if config.device == "cpu":  # inputs built ahead, repeat and timing sets, outputs in flight
        extra = 1.25 * (in_b * (full + 1 + sets) + out_b * (3 + sets)) / MIB
    else:  # inputs live on the GPU; outputs cross the host only where IPC is unavailable
        extra = 2.0 * out_b / MIB
    cap = int(config.memory_mb + extra)
    messages = len(job.trials) + 1 + sets + 2 * len(job.points)
    max_bytes = int(max(max(64, cap) * MIB, 1.1 * out_b * messages + 64 * MIB))
    return cap, max_bytes
