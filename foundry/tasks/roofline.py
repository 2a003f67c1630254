"""The roofline floor of a task: the fastest any kernel could be on a device.

floor = max(minimum bytes / copy bandwidth, FLOPs / matmul FLOP rate), where minimum
bytes = the inputs, the outputs and the parameters and buffers, each counted once, and
FLOPs are what `torch.utils.flop_counter.FlopCounterMode` counts on the reference
(matmuls, convolutions, attention; pointwise work is not counted, so the floor is a
lower bound), at the fp32 matmul rate, or at the bf16 one where the task computes in
16-bit floats (most of its floating-point inputs and parameters, by bytes). The bandwidth counts bytes read plus written, as a device-to-device copy
measures it. The reference runs on the meta device where it can (no memory, no time),
else on `fallback_device`.

Defaults: the H200 figures measured for this project (copy 4.25 TB/s, fp32 matmul with
TF32 off 51 TFLOP/s) and NVIDIA's published dense BF16 peak for it (989 TFLOP/s, not
measured). `measure_ceilings(device)` measures another device's, bf16 included.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Mapping

import torch
from torch.utils.flop_counter import FlopCounterMode

from foundry.tasks.loader import build_module
from foundry.types import Task

H200_COPY_BYTES_PER_S = 4.25e12
H200_FP32_FLOPS_PER_S = 51e12
H200_BF16_FLOPS_PER_S = 989e12  # the published dense peak: the anchor where none was measured
HALF = (torch.bfloat16, torch.float16)


@dataclass(frozen=True)
class DeviceCeilings:
    """A device's copy bandwidth (bytes read + written per second) and matmul FLOP rates
    (fp32, and bf16 for tasks that compute in 16-bit floats)."""

    bandwidth_bytes_per_s: float = H200_COPY_BYTES_PER_S
    flops_per_s: float = H200_FP32_FLOPS_PER_S
    source: str = "H200 anchors (copy 4.25 TB/s, fp32 matmul 51 TFLOP/s, bf16 dense peak 989 TFLOP/s)"
    half_flops_per_s: float = H200_BF16_FLOPS_PER_S

    def matmul_flops_per_s(self, *, half: bool) -> float:
        return self.half_flops_per_s if half else self.flops_per_s


@dataclass(frozen=True)
class Roofline:
    """A task's floor on a device. `bound` is "memory" or "compute"."""

    task_id: str
    min_bytes: int
    flops: int
    memory_ms: float
    compute_ms: float
    floor_ms: float
    bound: str
    bandwidth_bytes_per_s: float
    flops_per_s: float
    counted_on: str  # "meta" or the fallback device the reference ran on
    half: bool = False  # the FLOP rate is the bf16 one (the task computes in 16-bit floats)

    def fraction(self, runtime_ms: float | None) -> float | None:
        """floor / runtime: 1.0 means at the floor (above 1: the floor missed work)."""
        if runtime_ms is None or runtime_ms <= 0:
            return None
        return self.floor_ms / runtime_ms

    def position(self, runtime_ms: float) -> dict:
        """Where a kernel of `runtime_ms` sits against this floor (plain values, for a
        result's metrics): the floor, the fraction of it reached, what bounds it, the
        bandwidth and FLOP rate the kernel achieved, and a one-line diagnosis."""
        fraction = self.fraction(runtime_ms) or 0.0
        achieved_bw = self.min_bytes / (runtime_ms * 1e-3)
        achieved_flops = self.flops / (runtime_ms * 1e-3)
        return {"floor_ms": round(self.floor_ms, 6), "fraction": round(fraction, 4), "bound": self.bound,
                "achieved_gb_per_s": round(achieved_bw / 1e9, 1), "achieved_tflops": round(achieved_flops / 1e12, 2),
                "peak_gb_per_s": round(self.bandwidth_bytes_per_s / 1e9, 1),
                "peak_tflops": round(self.flops_per_s / 1e12, 2), "half": self.half,
                "diagnosis": self.diagnosis(runtime_ms)}

    def diagnosis(self, runtime_ms: float) -> str:
        """e.g. "memory-bound: 41% of the floor (moves 6.44 GB at 1780 GB/s of 4250; floor 1.52 ms, this 3.70 ms)"."""
        fraction = self.fraction(runtime_ms) or 0.0
        if self.bound == "memory":
            what = (f"moves {self.min_bytes / 1e9:.3g} GB at {self.min_bytes / (runtime_ms * 1e-3) / 1e9:.0f} GB/s "
                    f"of {self.bandwidth_bytes_per_s / 1e9:.0f}")
        else:
            what = (f"{self.flops / 1e9:.3g} GFLOP at {self.flops / (runtime_ms * 1e-3) / 1e12:.1f} TFLOP/s "
                    f"of {self.flops_per_s / 1e12:.0f}")
        return (f"{self.bound}-bound: {100 * fraction:.0f}% of the floor ({what}; floor {self.floor_ms:.3g} ms, "
                f"this {runtime_ms:.3g} ms)")


def _tensor_bytes(values: Any, seen: set[int]) -> int:
    """Bytes of every distinct tensor storage in (nested) `values`, each once."""
    total = 0
    if isinstance(values, torch.Tensor):
        key = id(values) if values.is_meta else values.untyped_storage().data_ptr()
        if key not in seen:
            seen.add(key)
            total += values.numel() * values.element_size()
    elif isinstance(values, (list, tuple)):
        for v in values:
            total += _tensor_bytes(v, seen)
    elif isinstance(values, Mapping):
        for v in values.values():
            total += _tensor_bytes(v, seen)
    return total


def count(model: torch.nn.Module, inputs: list[Any]) -> tuple[int, int]:
    """(minimum bytes, FLOPs) of one forward of `model` on `inputs`."""
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        out = model(*inputs)
    seen: set[int] = set()
    state = list(model.parameters()) + list(model.buffers())
    nbytes = _tensor_bytes(list(inputs), seen) + _tensor_bytes(state, seen) + _tensor_bytes(out, seen)
    return nbytes, int(counter.get_total_flops())


def computes_in_half(model: torch.nn.Module, inputs: list[Any]) -> bool:
    """Most of the floating-point bytes of `inputs` and `model`'s parameters are bf16 or fp16."""
    tensors = [x for x in list(inputs) + list(model.parameters()) if isinstance(x, torch.Tensor)
               and x.is_floating_point()]
    half = sum(x.numel() * x.element_size() for x in tensors if x.dtype in HALF)
    return half * 2 > sum(x.numel() * x.element_size() for x in tensors)


def _build_and_count(task: Task, overrides: Mapping[str, Any] | None, device: str) -> tuple[int, int, bool]:
    module = build_module(task, overrides)
    torch.manual_seed(0)
    with torch.device(device):
        model = module.Model(*module.get_init_inputs())
        inputs = list(module.get_inputs())
    return (*count(model, inputs), computes_in_half(model, inputs))


def floor_ms(*, min_bytes: int, flops: int, ceilings: DeviceCeilings, half: bool = False) -> tuple[float, float, float]:
    """(memory ms, compute ms, floor ms) for the given work on a device (`half`: at its
    bf16 matmul rate)."""
    memory_ms = min_bytes / ceilings.bandwidth_bytes_per_s * 1e3
    compute_ms = flops / ceilings.matmul_flops_per_s(half=half) * 1e3
    return memory_ms, compute_ms, max(memory_ms, compute_ms)


def roofline_for_task(task: Task, *, ceilings: DeviceCeilings | None = None,
                      overrides: Mapping[str, Any] | None = None,
                      fallback_device: str | None = "cpu") -> Roofline:
    """The floor of `task` at its size profile (plus `overrides`) on a device with
    `ceilings` (default: the H200's). Counts on the meta device; if the reference
    cannot run there (data-dependent code), runs it on `fallback_device` (None: raise
    instead, e.g. where running a full-size reference on the CPU would cost too much)."""
    ceilings = ceilings or DeviceCeilings()
    try:
        nbytes, flops, half = _build_and_count(task, overrides, "meta")
        where = "meta"
    except Exception:  # noqa: BLE001 - meta cannot run every op; count on a real device
        if fallback_device is None:
            raise
        nbytes, flops, half = _build_and_count(task, overrides, fallback_device)
        where = fallback_device
    memory_ms, compute_ms, floor = floor_ms(min_bytes=nbytes, flops=flops, ceilings=ceilings, half=half)
    return Roofline(task_id=task.task_id, min_bytes=nbytes, flops=flops, memory_ms=memory_ms,
                    compute_ms=compute_ms, floor_ms=floor,
                    bound="compute" if compute_ms > memory_ms else "memory",
                    bandwidth_bytes_per_s=ceilings.bandwidth_bytes_per_s,
                    flops_per_s=ceilings.matmul_flops_per_s(half=half), counted_on=where, half=half)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _best_seconds(fn, device: torch.device, repeats: int) -> float:
    fn()
    _sync(device)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        _sync(device)
        best = min(best, time.perf_counter() - t0)
    return best


def measure_ceilings(device: str | torch.device = "cpu", *, copy_bytes: int | None = None,
                     matmul_n: int | None = None, repeats: int = 5) -> DeviceCeilings:
    """Measure a device's copy bandwidth (a large tensor copy, bytes read + written) and
    fp32 and bf16 matmul FLOP rates (an n x n x n matmul each), best of `repeats`."""
    dev = torch.device(device)
    gpu = dev.type == "cuda"
    copy_bytes = copy_bytes or (1 << 30 if gpu else 1 << 26)
    n = matmul_n or (8192 if gpu else 1024)
    src = torch.empty(copy_bytes // 4, dtype=torch.float32, device=dev).uniform_()
    dst = torch.empty_like(src)
    copy_s = _best_seconds(lambda: dst.copy_(src), dev, repeats)
    del src, dst
    rates = {}
    for dtype in (torch.float32, torch.bfloat16):
        a = torch.randn(n, n, device=dev, dtype=dtype)
        b = torch.randn(n, n, device=dev, dtype=dtype)
        rates[dtype] = 2 * n ** 3 / _best_seconds(lambda: torch.mm(a, b), dev, repeats)
        del a, b
    name = torch.cuda.get_device_name(dev) if gpu else "cpu"
    return DeviceCeilings(bandwidth_bytes_per_s=2 * copy_bytes / copy_s, flops_per_s=rates[torch.float32],
                          half_flops_per_s=rates[torch.bfloat16],
                          source=f"measured on {name}: copy of {copy_bytes >> 20} MiB, {n}^3 fp32 and bf16 matmuls")
