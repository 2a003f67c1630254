"""Triton kernels built ahead of their first launch, several settings at once.

A screen runs every TUNABLE setting of a candidate in one worker, one after another, and
each setting's first launch compiles its kernels: on a convolution at published sizes,
eight settings spent 74-170 s there, nearly all of it in Triton's compiler, one core at
a time. Before that loop, `prebuild` forks one child per setting (at most `workers` at
once). A child swaps Triton's driver for a stand-in that names the device's own target
and turns every launch into a no-op once the kernel is compiled, then runs the setting's
forward on meta tensors: each kernel is compiled exactly as its real launch would
compile it, and lands in Triton's disk cache, where the setting's real first launch
finds it. Nothing a child computes is used: it only warms the cache, and a setting
whose child fails is simply compiled in the loop as before.

`builds_only` is the stand-in on its own (also how the tests build kernels for a GPU
their machine does not have).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence


@dataclass(frozen=True)
class BuildTarget:
    """What the stand-in driver reports: the GPU's compute capability, its warp size, the
    shared memory a block may opt into (bytes) and its SM count."""

    capability: int
    warp_size: int = 32
    max_shared_mem: int = 232448
    multiprocessor_count: int = 132


H200 = BuildTarget(capability=90)


@dataclass
class Built:
    """What a `builds_only` section loaded: (kernel name, shared memory bytes) per kernel."""

    kernels: list = field(default_factory=list)


class _DeviceUtils:
    def __init__(self, target: BuildTarget, record: Built):
        self.target, self.record = target, record

    def get_device_properties(self, device):
        return {"max_shared_mem": self.target.max_shared_mem, "multiprocessor_count": self.target.multiprocessor_count,
                "max_num_regs": 65536, "warpSize": self.target.warp_size}

    def load_binary(self, name, kernel, shared, device):
        self.record.kernels.append((name, shared))
        return 1, 1, 0, 0, 1024  # module, function, registers, spills, threads per block


class _NoLaunch:
    def __init__(self, src, metadata):
        pass

    def __call__(self, *args, **kwargs):
        return None


class _BuildOnlyDriver:
    def __init__(self, target: BuildTarget, record: Built):
        from triton.backends.compiler import GPUTarget
        self.target = GPUTarget("cuda", target.capability, target.warp_size)
        self.utils = _DeviceUtils(target, record)
        self.launcher_cls = _NoLaunch

    def is_active(self):
        return True

    def get_current_target(self):
        return self.target

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0

    def set_current_device(self, device):
        pass


def unsupported() -> str | None:
    """None where this Triton lets a driver be swapped in, else why not."""
    try:
        from triton.backends.compiler import GPUTarget  # noqa: F401
        from triton.runtime import driver
    except ImportError as e:
        return f"triton is not importable: {e}"
    if not hasattr(driver, "set_active"):
        return "this triton has no driver.set_active"
    return None


@contextlib.contextmanager
def builds_only(target: BuildTarget = H200):
    """Within: Triton kernels compile for `target` and launch as no-ops (their arguments
    may be meta tensors); yields the Built record of the kernels loaded (a kernel already
    in memory is not built again)."""
    from triton.runtime import driver
    record = Built()
    try:
        previous = driver.active
    except RuntimeError:  # no GPU driver here: Triton picks one again on first use
        previous = None
    driver.set_active(_BuildOnlyDriver(target, record))
    try:
        yield record
    finally:
        driver.set_active(previous)


def device_target() -> BuildTarget | None:
    """The current CUDA device as a BuildTarget (None without one, or where Triton's
    driver does not say)."""
    try:
        from triton.runtime import driver
        active = driver.active
        target = active.get_current_target()
        props = active.utils.get_device_properties(active.get_current_device())
        return BuildTarget(capability=int(target.arch), warp_size=int(target.warp_size),
                           max_shared_mem=int(props["max_shared_mem"]),
                           multiprocessor_count=int(props["multiprocessor_count"]))
    except Exception:  # noqa: BLE001 - no device, another backend, another Triton: no prebuild
        return None


@dataclass(frozen=True)
class PrebuildReport:
    """Per setting, in order: True where its child built and exited cleanly, and True
    where its child was killed at the timeout; the wall seconds of the whole prebuild."""

    built: tuple
    wall_s: float
    timed_out: tuple = ()


def prebuild(points: Sequence[dict], build: Callable[[dict], None], *, target: BuildTarget, workers: int,
             timeout_s: float, in_child: Callable[[], None] = lambda: None) -> PrebuildReport:
    """Fork a child per point (at most `workers` alive at once); each runs `in_child()`
    (e.g. to cut it off from the parent's channels), then `build(point)` inside
    `builds_only(target)`, and exits: 0 when it returned, 1 when it raised. A child still
    running `timeout_s` after its start is killed (its point is `timed_out`); where no child
    can be forked, the points not started are left unbuilt. The parent never runs `build`."""
    start = time.monotonic()
    built = [False] * len(points)
    timed_out = [False] * len(points)
    pending = list(enumerate(points))
    alive: dict[int, tuple[int, float]] = {}  # pid -> (point index, started)
    while pending or alive:
        while pending and len(alive) < max(1, workers):
            index, point = pending.pop(0)
            try:
                pid = os.fork()
            except OSError:  # no process to spare: the loop builds the rest
                pending = []
                break
            if pid == 0:  # the child: build, never return
                code = 1
                try:
                    in_child()
                    with builds_only(target):
                        build(point)
                    code = 0
                finally:
                    os._exit(code)
            alive[pid] = (index, time.monotonic())
        for pid, (index, started) in list(alive.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                del alive[pid]
                built[index] = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
            elif time.monotonic() - started > timeout_s:
                timed_out[index] = True
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        if alive:
            select.select([], [], [], 0.05)
    return PrebuildReport(built=tuple(built), wall_s=time.monotonic() - start, timed_out=tuple(timed_out))
