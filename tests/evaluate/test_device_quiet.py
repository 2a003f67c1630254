"""The wait for a quiet device before a timed section (foundry.evaluate.device_quiet), on a
scripted clock: probes that take what the script says."""

from __future__ import annotations

import pytest

from foundry.evaluate.device_quiet import wait_for_quiet_device


class ScriptedDevice:
    """A clock in ns and a probe that advances it: each probe takes `slow_us` while the
    clock is before `busy_until_ms`, else `fast_us`."""

    def __init__(self, *, busy_until_ms: float = 0.0, fast_us: float = 20.0, slow_us: float = 2000.0):
        self.now = 0
        self.busy_until_ns = int(busy_until_ms * 1e6)
        self.fast_ns, self.slow_ns = int(fast_us * 1e3), int(slow_us * 1e3)

    def clock(self) -> int:
        return self.now

    def probe(self) -> None:
        self.now += self.slow_ns if self.now < self.busy_until_ns else self.fast_ns


def test_an_idle_device_costs_one_window():
    dev = ScriptedDevice()
    wait = wait_for_quiet_device(dev.probe, clock=dev.clock, window_ms=5.0)
    assert wait.quiet and wait.slow_probes == 0
    assert 5.0 <= wait.waited_ms < 5.1 and wait.probes == 250  # 20 us a probe
    assert wait.slowest_probe_us == pytest.approx(20.0)


def test_a_device_held_by_another_context_is_waited_for_then_a_whole_quiet_window():
    dev = ScriptedDevice(busy_until_ms=30.0)
    wait = wait_for_quiet_device(dev.probe, clock=dev.clock, window_ms=5.0)
    assert wait.quiet and wait.slow_probes == 15  # 2 ms probes until the clock passed 30 ms
    assert 35.0 <= wait.waited_ms < 35.1
    assert wait.slowest_probe_us == pytest.approx(2000.0)


def test_one_slow_probe_inside_the_window_starts_it_again():
    dev = ScriptedDevice()
    calls = {"n": 0}

    def probe():
        calls["n"] += 1
        dev.now += 1_000_000 if calls["n"] == 100 else 20_000  # the 100th probe waits 1 ms (at 2 ms)
    wait = wait_for_quiet_device(probe, clock=dev.clock, window_ms=5.0)
    assert wait.quiet and wait.slow_probes == 1 and 7.9 < wait.waited_ms < 8.1


def test_a_device_that_stays_busy_ends_at_the_cap_and_says_so():
    dev = ScriptedDevice(busy_until_ms=10_000.0)
    wait = wait_for_quiet_device(dev.probe, clock=dev.clock, window_ms=5.0, cap_ms=100.0)
    assert not wait.quiet and 100.0 <= wait.waited_ms < 102.1 and wait.slow_probes == wait.probes == 50


def test_bad_settings_are_named():
    dev = ScriptedDevice()
    with pytest.raises(ValueError, match="threshold_us"):
        wait_for_quiet_device(dev.probe, clock=dev.clock, threshold_us=0)
