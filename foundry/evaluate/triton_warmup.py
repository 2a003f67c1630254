"""Compiling a screen's Triton points in parallel (the worker's side).

A screen builds every TUNABLE point of a candidate, and with Triton most of a point's
build is the JIT compile its first call triggers, one CPU core at a time. Before the
screen's own pass, `warm_up` calls each point's forward once in a pool of threads with
every Triton launch turned into a compile-only one (`JITFunction.run(..., warmup=True)`),
so the points' kernels are compiled concurrently into Triton's on-disk cache: Triton's
compiler leaves the interpreter lock in its native passes and in `ptxas`. Nothing a
warm-up computes is kept: its kernels never run, its outputs are dropped, and the screen
then builds each point again from a fresh module (a cache hit for its kernels), checks
it and times it as before. A point whose warm-up fails is simply compiled by the screen.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence

MAX_THREADS = 4  # points compiled at once: each may hold one output of the task meanwhile

_compile_only = threading.local()
_switch_installed = False


def available() -> bool:
    """Whether compile-only launches work here: real Triton (not its interpreter), and
    the warm-up not turned off (FOUNDRY_SCREEN_WARMUP=0)."""
    if os.environ.get("TRITON_INTERPRET") == "1" or os.environ.get("FOUNDRY_SCREEN_WARMUP") == "0":
        return False
    try:
        from triton.runtime.jit import JITFunction
    except Exception:  # noqa: BLE001 - no Triton, nothing to warm up
        return False
    return hasattr(JITFunction, "warmup")  # compile-only launches: run(..., warmup=True)


def _install_compile_only_switch() -> None:
    """Route Triton launches through a switch, once per process and for good: a launch
    from a thread marked compile-only compiles its kernel and returns without running
    it; any other launch is untouched. Never undone, so a launch hook installed later
    (a backend's worker setup wraps `JITFunction.run` too) is never lost."""
    global _switch_installed
    if _switch_installed:
        return
    from triton.runtime.jit import JITFunction
    original = JITFunction.run

    def run(self, *args, **kwargs):
        if getattr(_compile_only, "on", False):
            kwargs["warmup"] = True
        return original(self, *args, **kwargs)

    JITFunction.run = run
    _switch_installed = True


def warm_up(call_point: Callable[[dict], None], points: Sequence[dict], *, threads: int = MAX_THREADS) -> int:
    """Call `call_point(point)` (build the point's model from a fresh module and call its
    forward once) for every point, `threads` at a time, with Triton launches compile-only.
    Returns how many points' warm-ups ended without an error."""
    if len(points) < 2 or not available():
        return 0

    def one(point: dict) -> bool:
        _compile_only.on = True
        try:
            call_point(point)
            return True
        except BaseException:  # noqa: BLE001 - the screen builds the point again and reports it
            return False
        finally:
            _compile_only.on = False

    _install_compile_only_switch()
    with ThreadPoolExecutor(max(1, min(threads, len(points)))) as pool:
        return sum(pool.map(one, points))
