"""The records that flow between KernelFoundry's parts.

Every record is a frozen dataclass whose fields are plain values (str, int, float,
bool, tuples, and dicts of plain values), so it can be pickled to a sandbox worker or
a Ray actor and written as one Arrow row (`to_row` / `from_row`).
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Mapping

BACKENDS = ("c", "triton", "cuda", "cuda_inline")
ORIGINS = ("llm", "template", "migrant", "seed")
# the judge's flag for a task that cannot fit in its memory: no candidate of it can be judged
# there, so an island retires the task
TASK_TOO_LARGE = "task_too_large"


class Stage(enum.IntEnum):
    """The fitness ladder: how far a candidate got. Higher is better."""

    SYNTAX = 0  # no usable code could be extracted, or it does not parse
    COMPILE = 1  # the module or its kernels failed to build / import
    RUNTIME = 2  # forward raised, crashed, hung or ran out of memory
    SHAPE = 3  # outputs have the wrong shape, dtype or structure
    VALUE = 4  # outputs have the right shape but wrong values, or a guard fired
    CORRECT = 5  # every trial matched the reference and no guard fired

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, value: "str | int | Stage") -> "Stage":
        if isinstance(value, Stage):
            return value
        if isinstance(value, int):
            return cls(value)
        return cls[str(value).upper()]


def content_hash(text: str, *extra: str) -> str:
    """A short stable id for a piece of source (plus optional context strings)."""
    h = hashlib.sha256(text.encode())
    for e in extra:
        h.update(b"\0" + e.encode())
    return h.hexdigest()[:16]


def _plain(value: Any) -> Any:
    """Turn tuples/dicts/enums into JSON-friendly values."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


class _Row:
    """Mixin: conversion to and from a flat dict (one Arrow/Parquet row).

    Scalars stay scalars; dicts, tuples and lists become JSON strings in the row, so
    every record has one fixed, flat schema.
    """

    def to_row(self) -> dict[str, Any]:
        row: dict[str, Any] = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            v = getattr(self, f.name)
            if isinstance(v, (dict, list, tuple)):
                row[f.name] = json.dumps(_plain(v), sort_keys=True)
            elif isinstance(v, enum.Enum):
                row[f.name] = v.value
            else:
                row[f.name] = v
        return row

    @classmethod
    def from_row(cls, row: Mapping[str, Any]):
        kwargs: dict[str, Any] = {}
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            if f.name not in row:
                continue
            v = row[f.name]
            default = (
                f.default_factory()  # type: ignore[misc]
                if f.default_factory is not dataclasses.MISSING
                else f.default
            )
            if isinstance(default, (dict, tuple)) and isinstance(v, str):
                v = json.loads(v)
            if isinstance(default, tuple) and isinstance(v, list):
                v = _tuplify(v)
            kwargs[f.name] = v
        return cls(**kwargs)


def _tuplify(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_tuplify(x) for x in v)
    return v


@dataclass(frozen=True)
class Task:
    """One problem: a KernelBench-format module file and how to run it.

    `size_overrides` maps module-level constant names to values applied before
    `get_inputs()`/`get_init_inputs()` are called (the chosen size profile).
    `variants` are further override dicts (shape variants) checked for correctness.
    """

    task_id: str
    path: str  # absolute path of the task file
    source: str  # the task file's text
    size_profile: str = "full"  # "full" (GPU sizes) or "small" (CPU sizes)
    size_overrides: dict = field(default_factory=dict)
    variants: tuple = ()  # tuple of dicts of overrides
    atol: float | None = None  # None: per-dtype default
    rtol: float | None = None
    instructions: str = ""  # the task file's own instructions for the kernel writer
    level: int = 0  # 1 single op, 2 fusion, 3 block; 0 unknown

    @property
    def source_hash(self) -> str:
        return content_hash(self.source, json.dumps(_plain(self.size_overrides), sort_keys=True))


@dataclass(frozen=True)
class Candidate(_Row):
    """A proposed drop-in replacement: a Python file defining `ModelNew`."""

    candidate_id: str
    task_id: str
    source: str
    backend: str  # one of BACKENDS
    params: dict = field(default_factory=dict)  # tuned values for TUNABLE
    parent_ids: tuple = ()
    island_id: int = 0
    generation: int = 0
    strategy_id: str = ""  # prompt / template strategy that produced it
    origin: str = "seed"  # one of ORIGINS
    note: str = ""  # why it has no code, when stage 0 is certain (extraction failure)

    @staticmethod
    def make(*, task_id: str, source: str, backend: str, params: Mapping | None = None,
             **kwargs: Any) -> "Candidate":
        """Build a candidate whose id is the hash of its task, backend, source and params."""
        params = dict(params or {})
        cid = content_hash(source, task_id, backend, json.dumps(_plain(params), sort_keys=True))
        return Candidate(candidate_id=cid, task_id=task_id, source=source, backend=backend,
                         params=params, **kwargs)


@dataclass(frozen=True)
class EvalResult(_Row):
    """The judge's verdict and measurements for one candidate on one task."""

    candidate_id: str
    task_id: str
    stage: int  # a Stage value
    correct: bool
    error: str = ""  # truncated, secrets scrubbed
    flags: tuple = ()  # one string per guard that fired
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    runtime_ms: float | None = None  # median
    runtime_spread: float | None = None  # (p90 - p10) / median
    eager_ms: float | None = None
    compile_ms: float | None = None  # torch.compile baseline
    speedup_eager: float | None = None
    speedup_compile: float | None = None
    compile_s: float = 0.0  # building the candidate
    eval_s: float = 0.0  # whole evaluation wall time
    descriptor: tuple = ()  # MAP-Elites cell, filled by the island
    metrics: dict = field(default_factory=dict)  # profiler metrics, tuning timings, ...
    hardware: str = ""  # device id, e.g. "cpu:2-threads" or "NVIDIA H200"
    device: str = "cpu"

    @property
    def fitness(self) -> float:
        """Stage, plus the speedup over eager for correct ones (a correct kernel
        always outranks an incorrect one)."""
        if self.correct:
            return float(Stage.CORRECT) + float(self.speedup_eager or 0.0)
        return float(min(self.stage, int(Stage.VALUE)))


@dataclass(frozen=True)
class ScreenedPoint:
    """One TUNABLE setting as the judge's screening saw it: built, run once on fresh
    inputs and compared, and timed with the judge's protocol. Advisory: it only picks
    which settings get a full evaluation."""

    params: dict
    ok: bool
    runtime_ms: float | None = None
    error: str = ""
    # where the point's time went in the screen job, on the judge's clock: "build_trial_s"
    # (its module loaded, kernels compiled, run once and its output sent), "device_wait_s"
    # (on the first timed point: waiting for the device to itself), "timing_s" (the timed
    # window); and for a point that ran, the worker's own split of its build and trial
    # (advisory): "load_s", "construct_s", "inputs_s", "run_s" (its first launch's compile in it)
    seconds: dict = field(default_factory=dict)


MODES = ("translate", "optimize", "repair")


@dataclass(frozen=True)
class ProposalRequest:
    """What an island asks a proposer (the LLM or the template engine) for: one child.

    `mode`: "translate" (first kernel from the reference), "optimize" (improve `parent`
    using `inspirations`) or "repair" (fix a failed `parent`, whose `parent_result`
    carries the distilled error).
    """

    task: Task
    backend: str
    mode: str
    island_id: int = 0
    generation: int = 0
    parent: Candidate | None = None
    parent_result: EvalResult | None = None
    inspirations: tuple = ()  # tuple of (Candidate, EvalResult) pairs from other cells
    prompt_id: str = ""  # the prompt / strategy the prompt evolver picked
    prompt_sections: dict = field(default_factory=dict)  # evolved prompt sections
    hardware: dict = field(default_factory=dict)  # hardware description for prompts
    descriptor_hint: str = ""  # e.g. "memory level 1 -> try level 2 (shared-memory tiling)"
    seed: int = 0


class Proposer:
    """Interface of the mutation operators (LLM, template engine).

    `propose` never raises for a bad reply: a reply without usable code becomes a
    candidate with empty `source` and the reason in `note` (judged stage 0).
    """

    async def propose(self, request: ProposalRequest) -> Candidate:  # pragma: no cover
        raise NotImplementedError

    async def aclose(self) -> None:
        return None
