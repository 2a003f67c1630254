"""Config records of the runtime: `ray` group, run budgets and run options.

Each is a frozen dataclass with `from_config(mapping)`, which rejects unknown keys and
bad values with a message naming the key (as written on the command line).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from foundry.config_keys import ConfigError, checked_keys, plain_mapping


def _check(value: Any, f: dataclasses.Field, where: str) -> Any:
    kind = f.metadata.get("kind")
    key = f"{where}.{f.name}" if where else f.name
    if value is None:
        if f.metadata.get("nullable"):
            return None
        raise ConfigError(f"{key}: must be set (got null)")
    if kind in ("int", "float"):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (
                kind == "int" and not float(value).is_integer()):
            raise ConfigError(f"{key}: expected {'an integer' if kind == 'int' else 'a number'}, got {value!r}")
        value = int(value) if kind == "int" else float(value)
        lo = f.metadata.get("min")
        if lo is not None and value < lo:
            raise ConfigError(f"{key}: must be >= {lo}, got {value!r}")
        hi = f.metadata.get("max")
        if hi is not None and value > hi:
            raise ConfigError(f"{key}: must be <= {hi}, got {value!r}")
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: expected true or false, got {value!r}")
        return value
    if kind == "str":
        if not isinstance(value, str):
            raise ConfigError(f"{key}: expected a string, got {value!r}")
        choices = f.metadata.get("choices")
        if choices and value not in choices:
            raise ConfigError(f"{key}: {value!r} is not one of {', '.join(choices)}")
        return value
    if kind == "map":
        return plain_mapping(value, key)
    return value


def _field(kind: str, default: Any, **meta: Any) -> Any:
    meta["kind"] = kind
    if isinstance(default, dict):
        return field(default_factory=lambda: dict(default), metadata=meta)
    return field(default=default, metadata=meta)


class _FromConfig:
    WHERE = ""

    @classmethod
    def from_config(cls, mapping: Any):
        data = checked_keys(cls, mapping, group=cls.WHERE)
        kwargs = {f.name: _check(data[f.name], f, cls.WHERE) for f in dataclasses.fields(cls) if f.name in data}
        return cls(**kwargs)


GPU_LANES = 4  # lanes per GPU evaluator by default: one timing while the others build and check


@dataclass(frozen=True)
class RayConfig(_FromConfig):
    """Group `ray`: where Ray runs and how actors are placed."""

    WHERE = "ray"
    address: str | None = _field("str", None, nullable=True)  # null: a local instance; "auto" or host:port
    num_cpus: int | None = _field("int", None, nullable=True, min=1)  # local instance only
    num_gpus: int | None = _field("int", None, nullable=True, min=0)  # local instance only; null: detect
    cpu_evaluators: int = _field("int", 1, min=1)  # evaluators when the cluster has no GPU
    evaluator_cpus: float = _field("float", 1.0, min=0)  # CPUs reserved per evaluator actor
    max_gpu_evaluators: int | None = _field("int", None, nullable=True, min=1)  # cap: use at most N GPUs
    # candidates in flight per evaluator, each in a lane of its own (timed one at a time);
    # null: GPU_LANES per GPU evaluator, 1 per CPU evaluator
    slots_per_evaluator: int | None = _field("int", None, nullable=True, min=1)
    spread_islands: bool = _field("bool", True)  # islands round-robin over the cluster's nodes
    island_actors: int | None = _field("int", None, nullable=True, min=1)  # null: one per island
    max_restarts: int = _field("int", 3, min=-1)  # per actor (-1: unlimited)
    include_dashboard: bool = _field("bool", False)
    log_to_driver: bool = _field("bool", False)
    namespace: str | None = _field("str", None, nullable=True)
    runtime_env: dict = _field("map", {})

    def slots(self, *, gpu: bool) -> int:
        """Lanes (candidates in flight) per evaluator actor."""
        if self.slots_per_evaluator is not None:
            return self.slots_per_evaluator
        return GPU_LANES if gpu else 1


@dataclass(frozen=True)
class BudgetConfig(_FromConfig):
    """Top-level `budget`: the run stops at whichever comes first (null: no limit)."""

    WHERE = "budget"
    evaluations: int | None = _field("int", 200, nullable=True, min=0)  # whole run, all tasks
    evaluations_per_task: int | None = _field("int", None, nullable=True, min=0)
    llm_cost_usd: float | None = _field("float", None, nullable=True, min=0)
    wall_time_s: float | None = _field("float", 540.0, nullable=True, min=0)  # per driver session
    target_speedup: float | None = _field("float", None, nullable=True, min=0)  # per task, vs eager


@dataclass(frozen=True)
class RunOptions(_FromConfig):
    """Top-level `run`: how the search runs."""

    WHERE = "run"
    backend: str = _field("str", "auto", choices=("auto", "c", "triton", "cuda", "cuda_inline"))
    in_flight_per_island: int = _field("int", 2, min=1)  # candidates each island keeps in flight
    tune: bool = _field("bool", True)  # tune a candidate's TUNABLE space (templates.tune_*)
    max_duplicates: int = _field("int", 64, min=1)  # consecutive already-seen proposals -> task done
    checkpoint_every_s: float = _field("float", 30.0, min=0)
    migrate_every_s: float = _field("float", 10.0, min=0)
    poll_s: float = _field("float", 0.5, min=0.01)
    progress: str = _field("str", "auto", choices=("auto", "live", "log", "off"))
    progress_every_s: float = _field("float", 10.0, min=0.1)  # plain log lines when not a TTY
    stop_timeout_s: float = _field("float", 15.0, min=0)  # longest wait for in-flight work at the end
    evaluator_impl: str | None = _field("str", None, nullable=True)  # "module:factory" stand-in
    proposer_impl: str | None = _field("str", None, nullable=True)  # "module:factory" stand-in
    compiler_seeds: bool = _field("bool", True)  # each task's torch.compile kernels judged first (foundry.seeds)
    seed_timeout_s: float = _field("float", 300.0, min=1)  # longest a task's seed may take to make
    # seeds an evaluator makes at once (null: 1 on a CPU evaluator; on a GPU one half the
    # driver host's cores over its GPUs, 3 to 8)
    seeds_per_evaluator: int | None = _field("int", None, nullable=True, min=1)
    profile_elites: bool = _field("bool", True)  # GPU runs: hardware metrics of each new elite's kernels
    ncu_share: float = _field("float", 0.05, min=0, max=1)  # most of an evaluator's time Nsight Compute may hold
