"""The baseline cache: eager and torch.compile times (and on a GPU each one's time by CUDA
events alone and what its forward launched) per task source + sizes, device, hardware,
thread count, torch version, torch.compile mode and timing protocol, on disk (one small
JSON file per key); and reading a baseline job's outcome into a `Baseline`."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

import torch

from foundry.evaluate.disk_cache import JsonDiskCache
from foundry.evaluate.phases import PhaseTimes
from foundry.evaluate.timing_report import analyze
from foundry.types import Task, content_hash


@dataclass(frozen=True)
class Baseline:
    eager_ms: float | None
    compile_ms: float | None = None
    compile_s: float | None = None  # time torch.compile took to build
    error: str = ""
    # on a GPU, what one forward launched (CudaDevice.kernel_summary), profiled outside the timed runs
    eager_kernels: dict | None = None
    compile_kernels: dict | None = None
    # on a GPU, the median ms a call by CUDA events alone (the GPU's time, without the host's
    # launch cost, which the timings above count where a call is launch-bound)
    eager_gpu_ms: float | None = None
    compile_gpu_ms: float | None = None


def positive_figure(value) -> float | None:
    """`value` as a float where it is a positive number (not a bool), else None: how a
    recorded time or speedup is read back from JSON."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


def event_median_ms(gpu: dict | None) -> float | None:
    """The CUDA-event median (ms a call) of a GPU timing's details (a timing message's
    "gpu", a result's metrics["gpu_timing"]), else None."""
    return positive_figure(gpu.get("event_median_ms") if isinstance(gpu, dict) else None)


# the timing protocol the cached times were measured under: 2 counts a launch-bound GPU call
# at its back-to-back time and calls each CPU input set once per block; 3 profiles a GPU
# baseline after its timed runs, not before; 4 runs GPU workers without
# CUBLAS_WORKSPACE_CONFIG (it slowed every cuBLAS launch); 5 makes torch.compile's first
# call (Inductor's autotuning) with the device held; 6 runs CPU workers with glibc's malloc
# settled (worker_env.CPU_MALLOC_POLICY); 7 waits up to 30 s, not 2 s, for a quiet GPU
# before the warm-up (baselines timed beside a stopped process's queued work ran at half
# speed); a change measures again
TIMING_PROTOCOL = 7


def baseline_key(task: Task, *, device: str, hardware: str, threads: int, compile_mode: str = "default") -> str:
    """The cache key of a task's baselines (a torch.compile mode other than the default is
    a key of its own)."""
    parts = (task.source, json.dumps(task.size_overrides, sort_keys=True, default=str), device, hardware,
             str(threads), torch.__version__, f"timing protocol {TIMING_PROTOCOL}")
    return content_hash(*parts) if compile_mode == "default" else content_hash(*parts, f"mode={compile_mode}")


class BaselineCache:
    """Baselines on disk under `directory` (a `JsonDiskCache`), one record per key."""

    def __init__(self, directory: str):
        self._records = JsonDiskCache(directory)
        self.dir = self._records.dir

    def get(self, key: str) -> Baseline | None:
        data = self._records.get(key)
        if data is None:
            return None
        try:
            return Baseline(**{k: data.get(k) for k in ("eager_ms", "compile_ms", "compile_s", "eager_kernels",
                                                         "compile_kernels", "eager_gpu_ms", "compile_gpu_ms")},
                            error=data.get("error") or "")
        except TypeError:
            return None

    def put(self, key: str, value: Baseline) -> None:
        self._records.put(key, {**asdict(value), "torch": torch.__version__})


def baseline_from(out: Any, phases: PhaseTimes, *, compile_expected: bool = False) -> Baseline:
    """The eager and torch.compile times of a baseline job's outcome (a JobOutcome), each
    checked against the judge's clock; their wall times go into `phases`. A time missing
    without the worker's error (`compile_expected`: the job was to time torch.compile too)
    gets how the worker ended as its error."""
    eager = compiled = compile_s = eager_gpu = compile_gpu = None
    kernels: dict = {}
    start = end = None
    last = out.started_at
    for m in out.messages:
        kind = m.header.get("kind")
        if kind == "timing_start":
            start, end = m.at, None
        elif kind == "timing_end":
            end = m.at
        elif kind == "baseline":
            v = analyze(m.header, started_at=start, ended_at=end or m.at)
            which = "eager" if m.header.get("which") == "eager" else "compile"
            phases.add(f"baseline_{which}", m.at - last)
            last = m.at
            if which == "eager":
                eager, eager_gpu = v.runtime_ms, event_median_ms(m.header.get("gpu"))
            else:
                compiled, compile_gpu = v.runtime_ms, event_median_ms(m.header.get("gpu"))
                compile_s = m.header.get("compile_s")
        elif kind == "baseline_kernels":  # profiled after both timed runs
            kernels = {w: m.header[w] for w in ("eager", "compile") if isinstance(m.header.get(w), dict)}
    errors = out.of_kind("error")
    complete = eager is not None and (compiled is not None or not compile_expected)
    err = str(errors[0].header.get("error", "")) if errors else ("" if complete else out.exit_text())
    return Baseline(eager_ms=eager, compile_ms=compiled, compile_s=compile_s, error=err,
                    eager_kernels=kernels.get("eager"), compile_kernels=kernels.get("compile"),
                    eager_gpu_ms=eager_gpu, compile_gpu_ms=compile_gpu)
