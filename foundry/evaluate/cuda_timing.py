"""GPU timing for the judge: CUDA events, a whole-device synchronize around every trial,
L2 flushed before each trial, warm-up by time, trials until the median is stable, and a
host-clock cross-check that catches work escaping the timed stream.

Protocol of one trial: synchronize the whole device, write a buffer of at least twice
the device's L2 (evicting the inputs and outputs of the last trial; 256 MiB at least, as
triton.testing.do_bench does), read the host clock, record a start event on the current
stream, run the callable, record an end event, synchronize the whole device again, read
the host clock. The start event is queued behind the flush, so the host's launch latency
(tens of microseconds through Python) overlaps the flush instead of being timed as
kernel time; work that outlasts the flush still shows. A flush of 256 MiB takes under
0.1 ms on an H200, less than launching a kernel through a Python binding can take, so a
GPU-side spin of `launch_cover_us` (torch.cuda._sleep, calibrated once per device) is
queued after the flush too: the GPU stays busy while the host launches, as it does
when `triton.testing.do_bench` queues all its runs before synchronizing. The event time is the
measurement; the host time (which includes work on any stream, plus launch and sync
latency) checks it. When the host median exceeds the event median by more than the
tolerated slack, the candidate did work the events did not see (a side stream, a host
thread): the host median is reported instead, and `host_check_ok` is False.

The cover hides the host's launch time from every trial, which is right while the device
is the bound and wrong when the host is: a call whose Python takes 80 us to launch a 30 us
kernel costs 80 us a call wherever it runs back to back (a model, a loop), and do_bench
would show part of that. So after the trials the callable also runs back to back,
unsynchronised, for about `back_to_back_ms` (2 calls at least), on inputs it never
changes and with outputs nobody checks (only ever a reason to judge slower); when that
costs more per call than `launch_bound_ratio` x the event median, the call is
launch-bound and the back-to-back time per call is the measurement (`launch_bound`
True). A device-bound call's back-to-back time is its event time (or less, with the L2
warm), so the rule changes nothing there.

Before the warm-up it waits for a quiet device (foundry.evaluate.device_quiet). The TF32
policy is applied explicitly (never left to torch's defaults) and recorded.
"""

from __future__ import annotations

import math
import statistics
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from foundry.config_keys import checked_keys
from foundry.evaluate.device_quiet import QuietWait, wait_for_quiet_device

TF32_POLICIES = ("off", "on", "torch-default")
_flush_buffers: dict = {}

# Bound when this module is imported (in the worker, before any candidate code), so a
# candidate that replaces torch.cuda.Event or torch.cuda.synchronize cannot fool timing.
try:
    import torch as _torch
    _Event = _torch.cuda.Event
    _sync = _torch.cuda.synchronize
    _elapsed = _torch.cuda.Event.elapsed_time
    _sleep = getattr(_torch.cuda, "_sleep", None)
except ImportError:  # pragma: no cover - torch is a dependency
    _Event = _sync = _elapsed = _sleep = None  # type: ignore[assignment]


@dataclass(frozen=True)
class GpuTimingConfig:
    """How to time on a GPU. Times are milliseconds."""

    warmup_ms: float = 50.0  # warm up by time (at least `min_warmup_runs` runs)
    min_warmup_runs: int = 3
    min_trials: int = 20
    max_trials: int = 300
    budget_ms: float = 1500.0  # stop adding trials once this much was spent (after min)
    target_rel_ci: float = 0.01  # stop early once the median's 95% CI is this narrow
    flush_l2: bool = True
    tf32: str = "off"  # "off" | "on" | "torch-default"
    host_slack_ms: float = 0.05  # host clock may exceed events by slack + ratio * events
    host_slack_ratio: float = 0.25
    launch_cover_us: float = 200.0  # GPU spin queued before the start event (0: none)
    back_to_back_ms: float = 5.0  # how long the launch-bound check runs the call back to back (0: no check)
    launch_bound_ratio: float = 1.1  # back to back slower per call than this x the events: the host bounds it
    quiet_threshold_us: float = 250.0  # a probe kernel slower than this: another context holds the device
    quiet_window_ms: float = 5.0  # the device is quiet once every probe of this long a window was fast
    # what a stopped process left queued can be one launch of seconds (docs/timing.md: 2 s was too short)
    quiet_cap_ms: float = 30000.0  # the longest wait for a quiet device (0: no wait)

    @classmethod
    def from_config(cls, mapping: Mapping[str, Any] | None) -> "GpuTimingConfig":
        cfg = cls(**checked_keys(cls, mapping, group="gpu_timing"))
        if cfg.tf32 not in TF32_POLICIES:
            raise ValueError(f"tf32 must be one of {TF32_POLICIES}, got {cfg.tf32!r}")
        if cfg.launch_cover_us < 0:
            raise ValueError(f"launch_cover_us must be >= 0, got {cfg.launch_cover_us}")
        if cfg.back_to_back_ms < 0 or cfg.launch_bound_ratio < 1:
            raise ValueError(f"need back_to_back_ms >= 0 and launch_bound_ratio >= 1, got "
                             f"{cfg.back_to_back_ms}, {cfg.launch_bound_ratio}")
        if cfg.min_trials < 3 or cfg.max_trials < cfg.min_trials:
            raise ValueError(f"need 3 <= min_trials <= max_trials, got {cfg.min_trials}, {cfg.max_trials}")
        return cfg


@dataclass(frozen=True)
class GpuTiming:
    median_ms: float  # what the judge uses (events; host clock when the check failed; back to back when launch-bound)
    event_median_ms: float
    host_median_ms: float
    p10_ms: float
    p90_ms: float
    spread: float  # (p90 - p10) / median of the event times
    rel_ci: float  # width of the median's 95% CI over the median
    trials: int
    warmup_runs: int
    host_check_ok: bool
    l2_flush_bytes: int
    tf32: dict
    host_overhead_ms: float = 0.0
    launch_cover_cycles: int = 0
    back_to_back_ms: float = 0.0  # per call, run back to back unsynchronised (0: not measured)
    launch_bound: bool = False  # the host bounds the call: median_ms is the back-to-back time
    quiet_wait_ms: float = 0.0  # the wait for other processes' work to leave the device, before the warm-up
    quiet_slow_probes: int = 0  # probes of that wait that found the device held by another context
    quiet: bool = True  # False: the wait reached its cap with the device still busy
    event_ms: tuple = ()  # per trial, in trial order
    host_ms: tuple = ()

    def as_metrics(self) -> dict:
        skip = ("tf32", "event_ms", "host_ms")
        return {f"timing_{k}": v for k, v in self.__dict__.items() if k not in skip} | {
            "tf32_matmul": self.tf32.get("matmul"), "tf32_cudnn": self.tf32.get("cudnn")}


def apply_tf32_policy(policy: str) -> dict:
    """Set torch's TF32 switches for `policy` and return what is now in force."""
    import torch
    if policy not in TF32_POLICIES:
        raise ValueError(f"tf32 must be one of {TF32_POLICIES}, got {policy!r}")
    if policy != "torch-default":
        on = policy == "on"
        torch.backends.cuda.matmul.allow_tf32 = on
        torch.backends.cudnn.allow_tf32 = on
    return {"policy": policy, "matmul": bool(torch.backends.cuda.matmul.allow_tf32),
            "cudnn": bool(torch.backends.cudnn.allow_tf32)}


@contextmanager
def tf32_policy(policy: str):
    """`apply_tf32_policy(policy)` inside the block, torch's switches restored after it;
    "off" is how the judge computes and checks float32 (deploy checks a kernel the same way)."""
    import torch
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    try:
        yield apply_tf32_policy(policy)
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def l2_flush_buffer(device=None):
    """A cached byte buffer at least twice the device's L2 (256 MiB minimum)."""
    import torch
    dev = torch.device("cuda", torch.cuda.current_device() if device is None else device)
    buf = _flush_buffers.get(dev.index)
    if buf is None:
        l2 = int(getattr(torch.cuda.get_device_properties(dev), "L2_cache_size", 0) or 0)
        size = max(2 * l2, 256 << 20)
        buf = torch.empty(size, dtype=torch.uint8, device=dev)
        _flush_buffers[dev.index] = buf
    return buf


def release_flush_buffers() -> None:
    _flush_buffers.clear()


def _median_ci(sorted_times: list[float]) -> float:
    n = len(sorted_times)
    med = statistics.median(sorted_times)
    half = 1.96 * math.sqrt(n) / 2
    lo = max(0, int(math.floor(n / 2 - half)))
    hi = min(n - 1, int(math.ceil(n / 2 + half)))
    return (sorted_times[hi] - sorted_times[lo]) / med if med > 0 else float("inf")


def _quantile(sorted_times: list[float], q: float) -> float:
    if len(sorted_times) == 1:
        return sorted_times[0]
    pos = q * (len(sorted_times) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(sorted_times) - 1)
    return sorted_times[lo] + (sorted_times[hi] - sorted_times[lo]) * (pos - lo)


_overhead: dict = {}
_cycles_per_us: dict = {}


def sleep_cycles(us: float, device=None) -> int:
    """GPU clock cycles of `torch.cuda._sleep` that spin about `us` microseconds (measured
    once per device); 0 when `us` is 0 or this torch has no `_sleep`."""
    import torch
    sleep = _sleep
    if us <= 0 or sleep is None:
        return 0
    dev = torch.cuda.current_device() if device is None else torch.device("cuda", device).index
    if dev not in _cycles_per_us:
        probe = 1_000_000
        sleep(probe)  # first call: load the kernel
        _sync()
        start, end = _Event(enable_timing=True), _Event(enable_timing=True)
        start.record()
        sleep(probe)
        end.record()
        _sync()
        _cycles_per_us[dev] = probe / max(_elapsed(start, end) * 1e3, 1e-3)
    return int(us * _cycles_per_us[dev])


def _cover(cycles: int) -> None:
    if cycles:
        _sleep(cycles)


def host_overhead_ms(stream, flush=None, cover_cycles: int = 0) -> float:
    """Median host-clock time of an empty trial (flush, launch cover, event records,
    device syncs), cached."""
    key = (int(stream.cuda_stream), 0 if flush is None else flush.numel(), cover_cycles)
    if key not in _overhead:
        samples = []
        for _ in range(30):
            _sync()
            if flush is not None:
                flush.zero_()
            _cover(cover_cycles)
            start, end = _Event(enable_timing=True), _Event(enable_timing=True)
            h0 = time.perf_counter()
            start.record(stream)
            end.record(stream)
            _sync()
            samples.append((time.perf_counter() - h0) * 1e3)
        _overhead[key] = statistics.median(samples)
    return _overhead[key]


def back_to_back_per_call_ms(fn: Callable[[], Any], *, per_call_ms: float, target_ms: float,
                             clock: Callable[[], int], max_calls: int = 200) -> float:
    """Host-clock milliseconds per call of `fn()` run about `target_ms` back to back with
    one synchronize at the end (at least 2 calls)."""
    calls = max(2, min(max_calls, int(math.ceil(target_ms / max(per_call_ms, 1e-3)))))
    _sync()
    t0 = clock()
    for _ in range(calls):
        fn()
    _sync()
    return (clock() - t0) / 1e6 / calls


def judged_time(*, event_ms: float, host_ms: float, host_check_ok: bool, back_to_back_ms: float,
              launch_bound_ratio: float) -> tuple[float, bool]:
    """(the time the judge goes by, whether the call is launch-bound): the host median when
    the cross-check failed, the back-to-back time when that exceeds `launch_bound_ratio` x
    the event median, else the event median."""
    if not host_check_ok:
        return host_ms, False
    if back_to_back_ms > launch_bound_ratio * event_ms:
        return back_to_back_ms, True
    return event_ms, False


def wait_until_quiet(config: GpuTimingConfig, *, clock: Callable[[], int]) -> QuietWait:
    """Probe the device (a one-cycle spin, launched and waited for) until no other
    context's work is on it, within `config.quiet_cap_ms` (0, or no spin kernel: no wait)."""
    if config.quiet_cap_ms <= 0 or _sleep is None:
        return QuietWait(waited_ms=0.0, probes=0, slow_probes=0, slowest_probe_us=0.0, quiet=True)

    def probe() -> None:
        _sleep(1)
        _sync()
    return wait_for_quiet_device(probe, clock=clock, threshold_us=config.quiet_threshold_us,
                                 window_ms=config.quiet_window_ms, cap_ms=config.quiet_cap_ms)


def time_cuda(fn: Callable[[], Any], *, config: GpuTimingConfig = GpuTimingConfig(),
              device=None, clock: Callable[[], int] = time.perf_counter_ns,
              on_start: Callable[[], None] = lambda: None,
              before_trial: Callable[[], None] | None = None,
              back_to_back: Callable[[], Any] | None = None) -> GpuTiming:
    """Time `fn()` on the current CUDA device by the protocol in the module docstring.

    `clock` (integer ns) is the host clock of the cross-check; the worker passes the one
    it captured before any candidate code ran. `before_trial` runs before each trial, outside
    the timed region (the worker changes the inputs there). `back_to_back` is what the
    launch-bound check calls (default `fn`): the worker gives one whose outputs go nowhere,
    so the outputs it checks are the timed trials' own."""
    import torch
    tf32 = apply_tf32_policy(config.tf32)
    flush = l2_flush_buffer(device) if config.flush_l2 else None
    stream = torch.cuda.current_stream(device)
    cover = sleep_cycles(config.launch_cover_us, device)

    _sync()
    quiet = wait_until_quiet(config, clock=clock)
    warm = 0
    t_start = clock()
    while warm < config.min_warmup_runs or (clock() - t_start) / 1e6 < config.warmup_ms:
        fn()
        _sync()
        warm += 1
        if warm >= 10_000:
            break

    events, hosts = [], []
    spent = 0.0
    on_start()
    while len(events) < config.max_trials:
        _sync()
        if before_trial is not None:
            before_trial()
            _sync()
        if flush is not None:
            flush.zero_()  # queued: the start event below waits behind it on the GPU
        _cover(cover)  # and behind this spin, while the host launches the candidate
        start, end = _Event(enable_timing=True), _Event(enable_timing=True)
        h0 = clock()
        start.record(stream)
        fn()
        end.record(stream)
        _sync()
        h1 = clock()
        events.append(_elapsed(start, end))
        hosts.append((h1 - h0) / 1e6)
        spent += hosts[-1]
        n = len(events)
        if n >= config.min_trials:
            if spent >= config.budget_ms:
                break
            if n % 5 == 0 and _median_ci(sorted(events)) <= config.target_rel_ci:
                break

    ev = sorted(events)
    ho = sorted(hosts)
    ev_med, host_med = statistics.median(ev), statistics.median(ho)
    per_call_back_to_back = (back_to_back_per_call_ms(back_to_back or fn, per_call_ms=ev_med, clock=clock,
                                                      target_ms=config.back_to_back_ms)
                             if config.back_to_back_ms > 0 else 0.0)
    overhead = host_overhead_ms(stream, flush, cover)
    ok = host_med - overhead <= ev_med * (1 + config.host_slack_ratio) + config.host_slack_ms
    median, launch_bound = judged_time(event_ms=ev_med, host_ms=host_med, host_check_ok=ok,
                                     back_to_back_ms=per_call_back_to_back,
                                     launch_bound_ratio=config.launch_bound_ratio)
    return GpuTiming(
        median_ms=median, event_median_ms=ev_med, host_median_ms=host_med,
        p10_ms=_quantile(ev, 0.1), p90_ms=_quantile(ev, 0.9),
        spread=(_quantile(ev, 0.9) - _quantile(ev, 0.1)) / ev_med if ev_med > 0 else 0.0,
        rel_ci=_median_ci(ev), trials=len(ev), warmup_runs=warm, host_check_ok=ok,
        l2_flush_bytes=0 if flush is None else flush.numel(), tf32=tf32,
        host_overhead_ms=overhead, launch_cover_cycles=cover, back_to_back_ms=per_call_back_to_back,
        launch_bound=launch_bound, quiet_wait_ms=quiet.waited_ms, quiet_slow_probes=quiet.slow_probes,
        quiet=quiet.quiet, event_ms=tuple(events), host_ms=tuple(hosts))


def time_forward(call: Callable[[Sequence], Any], input_sets: Sequence[Sequence], *,
                 clock: Callable[[], int], params: Mapping[str, Any],
                 on_start: Callable[[], None] = lambda: None,
                 on_block: Callable[[], None] | None = None) -> dict:
    """The judge's device-interface timing contract (see cpu_timing.time_forward): one
    call per block, each block a trial by the protocol above, inputs rotating over the
    sets (the last output of each set is returned). `on_block`, when given, changes the
    inputs before every trial, outside the timed region; `last_input_changes[j]` says how
    many changes set j's final output saw. `block_ns` holds the judged time of
    each trial (event time, or the host clock when the cross-check failed; when the call is
    launch-bound, no trial below the back-to-back time per call); `span_ns` is
    the whole timed loop by the worker's clock (flushes and synchronizations included),
    for the judge to compare with its own window; the GPU details come under "gpu"."""
    n_sets = len(input_sets)
    last: list = [None] * n_sets
    k = [0]
    changes = [0]
    last_changes = [0] * n_sets

    def one():
        i = k[0] % n_sets
        last[i] = call(input_sets[i])
        last_changes[i] = changes[0]
        k[0] += 1

    def change_inputs():
        on_block()
        changes[0] += 1

    cfg = GpuTimingConfig(
        warmup_ms=float(params.get("warmup_ms", GpuTimingConfig.warmup_ms)),
        min_trials=max(10, n_sets, min(int(params.get("min_calls", 20)), 100)),
        max_trials=max(20, n_sets, min(int(params.get("max_calls", 300)), 300)),
        budget_ms=max(float(params.get("min_ms", 200.0)), 50.0),
        tf32=str(params.get("tf32", "off")))
    span = [0, 0]

    def started():
        span[0] = clock()
        on_start()

    def unrecorded():  # the launch-bound check's calls: their outputs are never judged
        call(input_sets[0])

    timing = time_cuda(one, config=cfg, clock=clock, on_start=started,
                       before_trial=change_inputs if on_block is not None else None, back_to_back=unrecorded)
    span[1] = clock()
    if not timing.host_check_ok:
        block_ns = [int(h * 1e6) for h in timing.host_ms]
    elif timing.launch_bound:  # no trial is judged faster than the call runs back to back
        block_ns = [int(max(e, timing.back_to_back_ms) * 1e6) for e in timing.event_ms]
    else:
        block_ns = [int(e * 1e6) for e in timing.event_ms]
    gpu = {k2: v for k2, v in timing.__dict__.items() if k2 not in ("event_ms", "host_ms")}
    return {"block_ns": block_ns, "calls_per_block": 1, "warmup_calls": timing.warmup_runs,
            "estimate_ns": timing.median_ms * 1e6, "last_outputs": last,
            "span_ns": span[1] - span[0], "gpu": gpu, "last_input_changes": last_changes}

