"""GPU guards for the judge, used inside the sandbox worker when device="cuda".

- `poison_free_memory`: every block the caching allocator holds but no tensor uses is
  filled with 0xFF bytes (NaN for float16/bfloat16/float32/float64, -1 for ints) before
  the candidate runs, so an output the candidate never writes cannot inherit an earlier
  result (the reference's, or its own from the last trial) through a reused block.
- `synchronize`: whole-device synchronize, so work queued on any stream has finished
  before outputs are read.
- `apply_memory_cap`: a per-process cap on the caching allocator.
- `profile_kernels` / `check_own_kernels`: the profiler's CUDA activity says which
  kernels ran; a candidate passes only if kernels of its own ran (names from its source
  or from `foundry.kernels` launch records, else any kernel the reference does not launch).
- `classify_cuda_error` / `context_is_lost`: which exceptions are CUDA faults that leave
  the process's context unusable, so the worker must be replaced.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable

POISON_BYTE = 0xFF

_FAULTS = (
    ("illegal_address", r"illegal memory access"),
    ("misaligned_address", r"misaligned address"),
    ("device_assert", r"device-side assert|device assert"),
    ("illegal_instruction", r"illegal instruction"),
    ("launch_failure", r"unspecified launch failure|CUDA_ERROR_LAUNCH_FAILED"),
    ("launch_timeout", r"launch timed out|CUDA_ERROR_LAUNCH_TIMEOUT"),
    ("hardware_stack_error", r"hardware stack error"),
    ("out_of_memory", r"out of memory|CUDA_ERROR_OUT_OF_MEMORY"),
    ("invalid_configuration", r"invalid configuration argument|too many resources requested"),
    ("cuda_error", r"CUDA error|CUDA driver|CUDA_ERROR_\w+|cudaError"),
)
# faults after which the CUDA context is dead in this process (sticky errors)
STICKY = frozenset({"illegal_address", "misaligned_address", "device_assert",
                    "illegal_instruction", "launch_failure", "launch_timeout",
                    "hardware_stack_error"})


def classify_cuda_error(exc: BaseException | str) -> str | None:
    """A short name of the CUDA fault described by `exc`, or None if it is not one."""
    text = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
    if not isinstance(exc, str) and type(exc).__name__ == "OutOfMemoryError":
        return "out_of_memory"
    for name, pattern in _FAULTS:
        if re.search(pattern, text, re.I):
            return name
    return None


def context_is_lost(exc: BaseException | str) -> bool:
    """True when the fault is sticky: this process cannot use the GPU any more."""
    return classify_cuda_error(exc) in STICKY


def device_is_healthy() -> bool:
    """Can this process still run a kernel and synchronize? (False after a sticky fault.)"""
    try:
        import torch
        x = torch.ones(16, device="cuda")
        ok = float((x * 2).sum().item()) == 32.0
        torch.cuda.synchronize()
        return ok
    except Exception:  # noqa: BLE001 - any failure means the context is unusable
        return False


def synchronize() -> None:
    """Wait for all work on every stream of the current device."""
    import torch
    torch.cuda.synchronize()


def apply_memory_cap(fraction: float, device=None) -> float:
    """Cap this process's caching allocator at `fraction` of the device's memory."""
    import torch
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"memory fraction must be in (0, 1], got {fraction}")
    torch.cuda.set_per_process_memory_fraction(fraction, device)
    return fraction


@dataclass(frozen=True)
class PoisonReport:
    blocks: int  # cached free blocks filled
    bytes: int  # bytes filled
    cached_free_bytes: int  # reserved - allocated before poisoning


def poison_free_memory(*, device=None, max_bytes: int | None = None) -> PoisonReport:
    """Fill every free block of the caching allocator with POISON_BYTE, then free it.

    Blocks are taken smallest first: the allocator picks the smallest free block that
    fits, so a request of a free block's exact size gets that block (no split). Free
    parts of small-pool segments (requests up to 1 MiB) are taken in 1 MiB pieces,
    since a larger request would go to the large pool. Passes repeat until no free
    block is left (or 8 passes).
    """
    import torch
    dev = torch.cuda.current_device() if device is None else device
    torch.cuda.synchronize(dev)
    before = torch.cuda.memory_reserved(dev) - torch.cuda.memory_allocated(dev)
    held, filled, count = [], 0, 0
    budget_hit = False
    for _ in range(8):
        blocks = sorted(_inactive_blocks(dev))
        if not blocks or budget_hit:
            break
        for size, small in blocks:
            pieces = [size] if not small or size <= SMALL_REQUEST else \
                [SMALL_REQUEST] * (size // SMALL_REQUEST) + ([size % SMALL_REQUEST] if size % SMALL_REQUEST else [])
            for piece in pieces:
                if max_bytes is not None and filled + piece > max_bytes:
                    budget_hit = True
                    break
                try:
                    t = torch.empty(piece, dtype=torch.uint8, device=dev)
                except torch.cuda.OutOfMemoryError:
                    budget_hit = True
                    break
                t.fill_(POISON_BYTE)
                held.append(t)
                filled += piece
                count += 1
            if budget_hit:
                break
    torch.cuda.synchronize(dev)
    del held
    return PoisonReport(blocks=count, bytes=filled, cached_free_bytes=before)


SMALL_REQUEST = 1 << 20  # the caching allocator's small-pool limit


def _inactive_blocks(dev) -> list[tuple[int, bool]]:
    """(size, in a small-pool segment) of every free cached block of device `dev`."""
    import torch
    found = []
    for seg in torch.cuda.memory_snapshot():
        if seg.get("device", dev) != dev:
            continue
        small = seg.get("segment_type") == "small"
        for block in seg.get("blocks", ()):
            size = int(block.get("size", 0))
            # a large-pool block of 1 MiB or less is unreachable: such requests go small
            if block.get("state") == "inactive" and size > 0 and (small or size > SMALL_REQUEST):
                found.append((size, small))
    return found


@dataclass(frozen=True)
class KernelRun:
    name: str
    time_us: float
    count: int


def profile_kernels(fn: Callable[[], Any], *, runs: int = 1) -> list[KernelRun]:
    """The CUDA kernels `fn()` launched (any stream), with total device time, by name."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(runs):
            fn()
        torch.cuda.synchronize()
    totals: dict[str, list[float]] = {}
    for ev in prof.events():
        if getattr(ev, "device_type", None) is None or "CUDA" not in str(ev.device_type):
            continue
        name = ev.name
        if name.startswith(("Memcpy", "Memset", "cuda", "Activity Buffer")):
            continue
        t = getattr(ev, "device_time_total", None)
        if t is None:
            t = getattr(ev, "cuda_time_total", 0.0)
        slot = totals.setdefault(name, [0.0, 0])
        slot[0] += float(t or 0.0)
        slot[1] += 1
    return [KernelRun(n, v[0], int(v[1])) for n, v in sorted(totals.items())]


def kernel_times_us(runs: Iterable[KernelRun], *, limit: int) -> list:
    """[name, device microseconds, launches] of each kernel, the slowest first."""
    return [[r.name[:120], round(r.time_us, 2), r.count] for r in sorted(runs, key=lambda r: -r.time_us)][:limit]


_GLOBAL_NAME = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+"
                          r"(?:__launch_bounds__\s*\([^)]*\)\s*)?([A-Za-z_]\w*)")
_TRITON_NAME = re.compile(r"@triton\.jit[^\n]*\n(?:\s*@[^\n]*\n)*\s*def\s+([A-Za-z_]\w*)")


def kernel_names_in_source(source: str, backend: str) -> set[str]:
    """Names of the kernels the candidate defines, read from its source."""
    if backend == "triton":
        return set(_TRITON_NAME.findall(source))
    return set(_GLOBAL_NAME.findall(source))


@dataclass(frozen=True)
class OwnKernelCheck:
    ok: bool
    own: tuple  # names of kernels attributed to the candidate
    others: tuple  # kernels also launched (library / torch ops)
    own_time_fraction: float
    note: str


def check_own_kernels(profiled: Iterable[KernelRun], *, expected: Iterable[str] = (),
                      reference: Iterable[str] = ()) -> OwnKernelCheck:
    """Did the candidate's own kernels run?

    With `expected` names (from the source or launch records), a profiled kernel is the
    candidate's when one of those names occurs in it (C++ names are mangled, Triton
    appends nothing or a suffix). Without them, any kernel the reference never launched.
    """
    runs = list(profiled)
    expected = {e for e in expected if e}
    reference = set(reference)
    own, others = [], []
    for r in runs:
        if expected:
            mine = any(re.search(rf"(?<![A-Za-z0-9]){re.escape(e)}(?![A-Za-z])", r.name)
                       for e in expected)
        else:
            mine = r.name not in reference
        (own if mine else others).append(r)
    total = sum(r.time_us for r in runs) or 0.0
    frac = sum(r.time_us for r in own) / total if total > 0 else (1.0 if own else 0.0)
    if own:
        note = f"{len(own)} own kernel(s) ran, {frac:.0%} of device time"
    elif not runs:
        note = "no CUDA kernel ran at all"
    else:
        wanted = ", ".join(sorted(expected)) or "any kernel the reference does not launch"
        note = f"none of the candidate's kernels ran (expected {wanted}); ran: " + \
            ", ".join(r.name[:60] for r in runs[:5])
    return OwnKernelCheck(bool(own), tuple(r.name for r in own),
                          tuple(r.name for r in others), frac, note)


class CudaDevice:
    """The CUDA side of the judge's device interface (see foundry.evaluate.device).

    The TF32 policy (FOUNDRY_TF32: off | on | torch-default; default off) is applied in
    the judge's process (references) and in every worker (candidates), and recorded.
    """

    name = "cuda"
    memory_fraction_env = "FOUNDRY_CUDA_MEMORY_FRACTION"
    tf32_env = "FOUNDRY_TF32"

    def __init__(self) -> None:
        import os

        from foundry.evaluate.cuda_timing import apply_tf32_policy
        self.tf32 = apply_tf32_policy(os.environ.get(self.tf32_env, "off"))

    def prepare_worker(self, threads: int) -> None:
        import os

        import torch
        torch.set_num_threads(threads)
        if not torch.cuda.is_available():
            raise RuntimeError("device 'cuda' asked for, but torch sees no CUDA GPU")
        torch.cuda.init()
        torch.cuda.set_device(torch.cuda.current_device())
        apply_memory_cap(float(os.environ.get(self.memory_fraction_env, "0.85")))
        from foundry.evaluate import cuda_timing  # binds the timing primitives now
        self.tf32 = cuda_timing.apply_tf32_policy(os.environ.get(self.tf32_env, "off"))
        cuda_timing.l2_flush_buffer()  # allocated before any candidate code

    def hardware_id(self, threads: int) -> str:
        import torch
        return torch.cuda.get_device_name()

    def to_device(self, value: Any) -> Any:
        import torch
        if isinstance(value, (torch.Tensor, torch.nn.Module)):  # a model's parameters and buffers too
            return value.to("cuda")
        if isinstance(value, (list, tuple)):
            return type(value)(self.to_device(v) for v in value)
        return value

    def synchronize(self) -> None:
        synchronize()

    def poison(self, enabled: bool) -> None:
        # Two layers: torch fills every uninitialised allocation (empty, empty_like,
        # at::empty in extensions) with NaN / max-int while deterministic mode is on,
        # and every free block the caching allocator holds is overwritten, so raw
        # allocator reuse cannot see an earlier result either.
        import warnings

        import torch
        import torch.utils.deterministic as det
        if enabled:
            poison_free_memory()  # first: its own fills need no second (deterministic) fill
        # the workers run without CUBLAS_WORKSPACE_CONFIG (worker_env): cuBLAS is not made
        # deterministic, which poisoning does not need, and its warning says so
        warnings.filterwarnings("ignore", message=r"(?s).*CUBLAS_WORKSPACE_CONFIG", category=UserWarning)
        torch.use_deterministic_algorithms(enabled, warn_only=True)
        det.fill_uninitialized_memory = True

    def static_patterns(self) -> dict[str, list[str]]:
        return {
            "streams": [r"torch\.cuda\.Stream\s*\(", r"torch\.cuda\.stream\s*\(",
                        r"\bcudaStreamCreate", r"\bcuStreamCreate", r"ExternalStream\s*\(",
                        r"\bcudaDeviceReset", r"get_stream_from_external"],
            "timer_patching": [r"torch\.cuda\.(Event|synchronize|Stream)\s*=",
                               r"\belapsed_time\s*=", r"torch\.cuda\.Event\.\w+\s*="],
            "allocator_tampering": [r"CUDAPluggableAllocator", r"change_current_allocator",
                                    r"_set_allocator_settings", r"set_per_process_memory_fraction",
                                    r"use_deterministic_algorithms",
                                    r"fill_uninitialized_memory"],
        }

    def time_forward(self, call, input_sets, *, clock, params, on_start=lambda: None,
                     on_block=None) -> dict:
        from foundry.evaluate.cuda_timing import time_forward
        return time_forward(call, input_sets, clock=clock, params=params, on_start=on_start,
                            on_block=on_block)

    def kernels_ran(self, call, *, source: str, backend: str, expected: Iterable[str] = (),
                    reference_kernels: Iterable[str] = ()) -> OwnKernelCheck:
        """Profile one `call()` and check that the candidate's own kernels ran."""
        names = set(expected) | kernel_names_in_source(source, backend)
        return check_own_kernels(profile_kernels(call), expected=names,
                                 reference=reference_kernels)

    def kernel_summary(self, call) -> dict:
        """The kernels one `call()` launched: how many distinct, how many launches, their
        device time, and the slowest (for a baseline's profile)."""
        runs = profile_kernels(call)
        return {"kernels": len(runs), "launches": sum(r.count for r in runs),
                "device_us": round(sum(r.time_us for r in runs), 2),
                "kernel_times_us": kernel_times_us(runs, limit=8)}

    def profiled_call(self, call, *, source: str, backend: str) -> tuple:
        """Run `call()` once under the profiler: (its output, a report of the kernels that
        ran: {"own_kernels": count of the candidate's, "kernels": names, ...})."""
        box: list = []
        runs = profile_kernels(lambda: box.append(call()))
        chk = check_own_kernels(runs, expected=kernel_names_in_source(source, backend))
        report = {"own_kernels": sum(r.count for r in runs if r.name in chk.own),
                  "own_time_fraction": round(chk.own_time_fraction, 4),
                  "kernels": [r.name[:120] for r in runs][:12], "kernel_note": chk.note,
                  # the slowest first: [name, device microseconds, launches]
                  "kernel_times_us": kernel_times_us(runs, limit=12)}
        return box[0], report
