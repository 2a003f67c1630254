"""Wait, before a timed section's first run, until no other process's work is on the GPU.

The device gate stops (SIGSTOP) every other lane's worker and the compiler-seed processes
for a timed section, but what a stopped process had already queued on the GPU runs on:
a correctness trial of a 150 ms convolution, say. Without MPS the GPU time-slices between
the contexts that have work, so a candidate timed beside it runs at about half speed with
a tight spread, and is judged slower than it is (seen on the H200: the same cuBLAS GEMM at
2.7 ms in one timing and 5.2 ms in another within one run).

The probe is the timed process's own: a tiny kernel launched and waited for on the host
clock. On an idle device that takes tens of microseconds; while another context holds the
GPU, the probe waits for its time slice. The device counts as quiet once every probe
over a window longer than a time slice (`window_ms`) came back within `threshold_us`; a
slow probe starts the window again. The wait gives up after `cap_ms` and says so, so a
busy device costs a bounded delay and never a failed evaluation. The wait is spent well:
the other lanes are stopped meanwhile, and the device is busy with the work being
drained, which would otherwise have run inside the timed trials.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class QuietWait:
    """What the wait saw: how long it took, its probes, the slow ones among them, the
    slowest probe, and whether the device was quiet at the end (False: the cap ended it)."""

    waited_ms: float
    probes: int
    slow_probes: int
    slowest_probe_us: float
    quiet: bool


def wait_for_quiet_device(probe: Callable[[], None], *, clock: Callable[[], int], threshold_us: float = 250.0,
                          window_ms: float = 5.0, cap_ms: float = 2000.0) -> QuietWait:
    """Call `probe()` (launch a tiny kernel and wait for it) until the probes of one
    `window_ms` all took at most `threshold_us` on `clock` (integer ns), or `cap_ms` passed."""
    if threshold_us <= 0 or window_ms < 0 or cap_ms < 0:
        raise ValueError(f"need threshold_us > 0, window_ms >= 0 and cap_ms >= 0, got "
                         f"{threshold_us}, {window_ms}, {cap_ms}")
    start = clock()
    window_start = start
    probes = slow = 0
    slowest = 0.0
    while True:
        t0 = clock()
        probe()
        t1 = clock()
        probes += 1
        took_us = (t1 - t0) / 1e3
        slowest = max(slowest, took_us)
        if took_us > threshold_us:
            slow += 1
            window_start = t1
        elapsed_ms = (t1 - start) / 1e6
        if (t1 - window_start) / 1e6 >= window_ms:
            return QuietWait(waited_ms=elapsed_ms, probes=probes, slow_probes=slow, slowest_probe_us=slowest,
                             quiet=True)
        if elapsed_ms >= cap_ms:
            return QuietWait(waited_ms=elapsed_ms, probes=probes, slow_probes=slow, slowest_probe_us=slowest,
                             quiet=False)
