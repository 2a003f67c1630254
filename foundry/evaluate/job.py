"""What the judge asks a sandbox worker to do: one typed job, sent as JSON.

The judge builds a `Job`, `protocol.write_job` frames it on the job pipe, and the worker
reads it back with `protocol.read_job` (both ends of the framing live in protocol.py).
`Job.from_json` validates every field, so a malformed job fails loudly in the worker
instead of being read by string keys somewhere deep in the harness.

Kinds:
- "candidate": load the candidate, run every trial, repeat trial 0, then the timing protocol
  (a task with differential inputs has one paired trial per such input after the others:
  trial 0's inputs with that input redrawn, `TrialSpec.redraw`);
- "baseline": time the task's own `Model` (eager, then torch.compile when asked);
- "screen": for each of `points` (TUNABLE settings), load the candidate with those
  params, run trial 0's inputs once and time it with the same protocol on one input set;
  the judge keeps only what it needs to pick finalists, which then get a full evaluation.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

KINDS = ("candidate", "baseline", "screen")


class JobError(ValueError):
    """A job whose fields are missing or of the wrong type."""


@dataclass(frozen=True)
class TaskSpec:
    task_id: str
    path: str
    source: str
    overrides: dict = field(default_factory=dict)


@dataclass(frozen=True)
class TrialSpec:
    """One trial's inputs: a seed, a distribution ("standard" | "heavy") and the variant
    (index into `Job.variants`: 0 is the task's own sizes). A paired trial has `redraw`,
    the index of the one input taken from the set of `redraw_seed` (the rest are those of
    the trial with its seed, distribution and variant)."""

    seed: int
    distribution: str
    variant: int = 0
    redraw: int | None = None
    redraw_seed: int = 0

    @property
    def paired(self) -> bool:
        return self.redraw is not None


@dataclass(frozen=True)
class TimingSpec:
    """Which trials' inputs the timing protocol runs on, and the protocol's parameters
    (warmup_ms, min_ms, min_calls, max_calls, block_ms, tf32)."""

    sets: tuple
    params: dict


@dataclass(frozen=True)
class CandidateSpec:
    source: str
    backend: str
    params: dict = field(default_factory=dict)
    launch_key: str | None = None
    worker_setup: str | None = None
    record_ops: bool = True


@dataclass(frozen=True)
class Job:
    kind: str
    device: str
    threads: int
    task: TaskSpec
    variants: tuple  # size overrides per variant (dicts)
    init_seed: int
    trials: tuple  # TrialSpec
    timing: TimingSpec | None = None
    candidate: CandidateSpec | None = None
    compile_baseline: bool = False
    compile_mode: str = "default"  # torch.compile's mode for that baseline
    points: tuple = ()  # screen jobs: the TUNABLE settings, in order
    prebuild_workers: int = 0  # screen jobs: settings whose kernels are built at once before the loop
    prebuild_timeout_s: float = 60.0  # screen jobs: a setting not built within this is dropped
    cuda_ipc: bool = False  # set by the sandbox when the judge imports CUDA outputs

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise JobError(f"job kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.kind in ("candidate", "screen") and self.candidate is None:
            raise JobError(f"a {self.kind} job needs a candidate")
        if self.kind == "screen" and (self.timing is None or not self.points):
            raise JobError("a screen job needs points and a timing spec")
        for i, t in enumerate(self.trials):
            if not 0 <= t.variant < len(self.variants):
                raise JobError(f"trial variant {t.variant} outside the job's {len(self.variants)} variants")
            if t.paired:
                if type(t.redraw) is not int or t.redraw < 0 or type(t.redraw_seed) is not int:
                    raise JobError(f"trial {i}: redraw must be an input index and redraw_seed an int")
                self.base_of(i)  # raises when it has no trial to pair with

    @property
    def main_trials(self) -> list[int]:
        """Indices of the trials at the task's own sizes (paired trials not counted)."""
        return [i for i, t in enumerate(self.trials) if t.variant == 0 and not t.paired]

    @property
    def paired_trials(self) -> list[int]:
        """Indices of the paired trials (one input redrawn)."""
        return [i for i, t in enumerate(self.trials) if t.paired]

    def base_of(self, index: int) -> int:
        """The trial a paired trial `index` shares every input but one with."""
        p = self.trials[index]
        for k, t in enumerate(self.trials):
            if not t.paired and (t.seed, t.distribution, t.variant) == (p.seed, p.distribution, p.variant):
                return k
        raise JobError(f"paired trial {index} has no trial with its seed, distribution and variant")

    def to_json(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def from_json(cls, data: bytes | str) -> "Job":
        try:
            raw = json.loads(data)
            timing = raw.get("timing")
            cand = raw.get("candidate")
            return cls(kind=str(raw["kind"]), device=str(raw["device"]), threads=int(raw["threads"]),
                       task=TaskSpec(**raw["task"]), variants=tuple(dict(v) for v in raw["variants"]),
                       init_seed=int(raw["init_seed"]),
                       trials=tuple(TrialSpec(**t) for t in raw["trials"]),
                       timing=TimingSpec(sets=tuple(int(i) for i in timing["sets"]), params=dict(timing["params"]))
                       if timing else None,
                       candidate=CandidateSpec(**cand) if cand else None,
                       compile_baseline=bool(raw.get("compile_baseline", False)),
                       compile_mode=str(raw.get("compile_mode", "default")),
                       points=tuple(dict(p) for p in raw.get("points") or ()),
                       prebuild_workers=int(raw.get("prebuild_workers", 0)),
                       prebuild_timeout_s=float(raw.get("prebuild_timeout_s", 60.0)),
                       cuda_ipc=bool(raw.get("cuda_ipc", False)))
        except JobError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise JobError(f"malformed job: {type(e).__name__}: {e}") from None
