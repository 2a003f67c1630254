"""A region's share is timed as it runs inside the forward: on a GPU, calls queued back to
back with one synchronise per burst, not a synchronise per call (foundry.extract.timing).
The clock here is scripted: each call costs 0.1 ms and each synchronise 1 ms."""

import pytest

from foundry.extract import timing

CALL_S, SYNC_S = 1e-4, 1e-3


@pytest.fixture
def scripted_clock(monkeypatch):
    now = [0.0]
    counts = {"calls": 0, "syncs": 0}

    def call():
        now[0] += CALL_S
        counts["calls"] += 1

    def sync(device):
        if device.startswith("cuda"):
            now[0] += SYNC_S
            counts["syncs"] += 1

    monkeypatch.setattr(timing.time, "perf_counter", lambda: now[0])
    monkeypatch.setattr(timing, "_sync", sync)
    return call, counts


def test_each_call_timed_apart_pays_its_synchronise(scripted_clock):
    call, counts = scripted_clock
    ms = timing.median_ms(call, device="cuda")
    assert ms == pytest.approx((CALL_S + SYNC_S) * 1e3)
    assert counts["syncs"] >= counts["calls"] - timing.WARMUP


def test_back_to_back_spreads_one_synchronise_over_a_burst(scripted_clock):
    call, counts = scripted_clock
    ms = timing.median_ms(call, device="cuda", back_to_back=True)
    burst = int(timing.BURST_S / (CALL_S + SYNC_S))  # 4 calls of 0.1 ms and one 1 ms synchronise
    assert ms == pytest.approx((burst * CALL_S + SYNC_S) * 1e3 / burst)
    assert ms < 0.5 * (CALL_S + SYNC_S) * 1e3
    assert counts["calls"] > 3 * counts["syncs"]


def test_back_to_back_changes_nothing_on_the_cpu(scripted_clock):
    call, _ = scripted_clock
    assert timing.median_ms(call, device="cpu", back_to_back=True) == pytest.approx(CALL_S * 1e3)


def test_interleaved_timing_passes_back_to_back_on(scripted_clock):
    call, _ = scripted_clock
    apart, queued = (timing.interleaved_median_ms([call], device="cuda", back_to_back=b)[0] for b in (False, True))
    assert queued < 0.5 * apart
