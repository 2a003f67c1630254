"""EvalConfig: every knob of the judge, as one frozen dataclass."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping

from foundry.config_keys import checked_keys
from foundry.paths import cache_root

DEVICES = ("cpu", "cuda")
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def _default_cache_dir() -> str:
    return str(cache_root() / "baselines")


@dataclass(frozen=True)
class EvalConfig:
    """How candidates are judged.

    device: "cpu" or "cuda" (the CUDA parts are imported lazily).
    trials: correctness trials, each on fresh random inputs (new seeds).
    seed: base seed for the trials' inputs; None draws fresh seeds per evaluation.
    timeout_s: hard deadline for one candidate's whole sandbox run (build included).
    memory_mb: host-memory cap of a sandbox worker (address-space growth and resident size),
        in MB; raised automatically to what a large task's trials need (inputs and outputs
        on the host for cpu; a CUDA context plus host-side outputs for cuda).
    allow_torch_ops: judge pure-PyTorch rewrites on correctness and exploit guards alone.
    allow_precision_drop: do not flag lower-precision arithmetic in the source.
    threads: fixed thread count of workers (torch, OpenMP) for timing.
    secret_env_names: extra environment variable names stripped from workers.
    speedup_recheck_threshold: speedups above it are timed again in a fresh worker.
    timing_min_ms / timing_min_calls / timing_max_calls / timing_block_ms / warmup_ms:
        the timing protocol (blocks of calls, median of the per-block means).
    compile_baseline: also time torch.compile (slow on CPU the first time; cached).
    compile_mode: the torch.compile mode of that baseline ("default", "reduce-overhead",
        "max-autotune", "max-autotune-no-cudagraphs"); cached per mode.
    baseline_cache_dir: where baselines are cached (per task source+sizes, device, torch).
    check_variants: also check the task's declared shape variants for correctness.
    full_size_trials / large_task_mb: a task whose inputs and outputs of one trial exceed
        `large_task_mb` runs at most `full_size_trials` trials at its own size (one with
        standard, one with heavy-tailed inputs); the rest of `trials` run at its
        SMALL_SIZES, if it declares them.
    idle_probe_ms: window in which a worker must stay idle after forward returns.
    max_error_chars: error text is truncated to this many characters.
    degenerate_ok: task ids (shell-style patterns allowed) the user declares not degenerate:
        the judge skips its degeneracy check for them and the result's metrics say so
        (a task file may declare it itself: DEGENERATE_OK = "why").
    isolation: "auto" puts candidate workers in a read-only mount namespace without network
        or capabilities when the judge may (root); "required" fails when it may not; "none".
    standby: on a GPU, run each job in a child forked ahead of it (its sandbox set up and
        its CUDA context made while the lane finished the previous job); off by default
        until its gain is measured on a GPU. Each lane then holds one more CUDA context.
    screen_prebuild_workers: on a GPU, a screen of a Triton candidate first builds its
        settings' kernels this many at once, each in a child process, into Triton's disk
        cache (the screen's loop then finds them built); 0 builds each in the loop.
    screen_build_s: on a GPU, a screen's setting whose kernels are not built within this
        many seconds (by its prebuild child) is dropped from the screen: neither built in
        the loop nor timed (a convolution template's largest tiles took up to 185 s).
    """

    device: str = "cpu"
    trials: int = 5
    seed: int | None = None
    timeout_s: float = 120.0
    memory_mb: int = 4096
    allow_torch_ops: bool = False
    allow_precision_drop: bool = False
    threads: int = 1
    secret_env_names: tuple = ()
    speedup_recheck_threshold: float = 10.0
    timing_min_ms: float = 100.0
    timing_min_calls: int = 20
    timing_max_calls: int = 100000
    timing_block_ms: float = 10.0
    warmup_ms: float = 30.0
    compile_baseline: bool = True
    compile_mode: str = "default"
    baseline_timeout_s: float = 600.0
    baseline_cache_dir: str = field(default_factory=_default_cache_dir)
    check_variants: bool = True
    full_size_trials: int = 2
    large_task_mb: float = 64.0
    idle_probe_ms: float = 40.0
    max_error_chars: int = 4000
    isolation: str = "auto"  # auto | none | required: read-only filesystem, no network, no capabilities
    standby: bool = False  # cuda: each job in a child forked ahead (CUDA context ready)
    screen_prebuild_workers: int = 8  # cuda, Triton: a screen's settings built at once (0: in its loop)
    screen_build_s: float = 60.0  # cuda, Triton: a setting not built within this is dropped from the screen
    tf32: str = "off"  # cuda: TF32 for matmul and cuDNN: "off" | "on" | "torch-default"
    atol: float | None = None  # None: the task's TOLERANCES, else per-dtype defaults
    rtol: float | None = None
    degenerate_ok: tuple = ()  # task ids / patterns declared not degenerate

    def __post_init__(self) -> None:
        if self.compile_mode not in COMPILE_MODES:
            raise ValueError(f"EvalConfig.compile_mode: unknown torch.compile mode {self.compile_mode!r} "
                             f"(choose from {', '.join(COMPILE_MODES)})")
        if self.device not in DEVICES:
            raise ValueError(f"EvalConfig.device: unknown device {self.device!r} "
                             f"(choose from {', '.join(DEVICES)})")
        for name in ("trials", "threads", "memory_mb", "timing_min_calls", "timing_max_calls",
                     "full_size_trials"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"EvalConfig.{name} must be >= 1, got {getattr(self, name)!r}")
        if int(self.screen_prebuild_workers) < 0:
            raise ValueError(f"EvalConfig.screen_prebuild_workers must be >= 0, got {self.screen_prebuild_workers!r}")
        for name in ("timeout_s", "baseline_timeout_s", "timing_block_ms", "screen_build_s"):
            if float(getattr(self, name)) <= 0:
                raise ValueError(f"EvalConfig.{name} must be > 0, got {getattr(self, name)!r}")
        if int(self.full_size_trials) < 2:
            raise ValueError(f"EvalConfig.full_size_trials must be >= 2 (one standard and one heavy-tailed "
                             f"trial at full size), got {self.full_size_trials!r}")
        if float(self.large_task_mb) <= 0:
            raise ValueError(f"EvalConfig.large_task_mb must be > 0, got {self.large_task_mb!r}")
        if self.tf32 not in ("off", "on", "torch-default"):
            raise ValueError(f"EvalConfig.tf32 must be 'off', 'on' or 'torch-default', got {self.tf32!r}")
        if self.isolation not in ("auto", "none", "required"):
            raise ValueError(f"EvalConfig.isolation: unknown value {self.isolation!r} "
                             f"(choose from auto, none, required)")
        ids = (self.degenerate_ok,) if isinstance(self.degenerate_ok, str) else self.degenerate_ok
        if not isinstance(ids, (list, tuple)) or not all(isinstance(i, str) and i for i in ids):
            raise ValueError(f"EvalConfig.degenerate_ok must be a list of task ids, got {self.degenerate_ok!r}")
        object.__setattr__(self, "degenerate_ok", tuple(ids))
        if isinstance(self.secret_env_names, (list, str)):
            names = (self.secret_env_names,) if isinstance(self.secret_env_names, str) \
                else self.secret_env_names
            object.__setattr__(self, "secret_env_names", tuple(names))

    @classmethod
    def from_config(cls, mapping: Mapping[str, Any] | None = None) -> "EvalConfig":
        """Build from a mapping (a dict or an OmegaConf node); unknown keys are rejected."""
        kwargs = checked_keys(cls, mapping, group="evaluator")
        if kwargs.get("baseline_cache_dir") in (None, ""):
            kwargs.pop("baseline_cache_dir", None)
        if "secret_env_names" in kwargs and kwargs["secret_env_names"] is not None:
            kwargs["secret_env_names"] = tuple(kwargs["secret_env_names"])
        if "degenerate_ok" in kwargs:
            ids = kwargs["degenerate_ok"]
            kwargs["degenerate_ok"] = () if ids is None else (ids,) if isinstance(ids, str) else tuple(ids)
        return cls(**kwargs)

    def replace(self, **changes: Any) -> "EvalConfig":
        return dataclasses.replace(self, **changes)
