"""Screening a candidate's TUNABLE points in one sandbox job (the judge's side).

The worker builds each point and runs it once on trial 0's inputs, then, with the
device to itself once, times every point that ran with the judge's protocol, one after
another (`screen_run.run_screen`). Here each output is compared as it arrives and
dropped at once, so the judge holds one output at a time whatever the number of points.
Unlike a full evaluation, the reference output exists while the candidate's code runs:
a screen only picks finalists, and every finalist then gets a full evaluation in a fresh
worker with every guard, so a point that games the screen gains nothing but a failed
full evaluation.
"""

from __future__ import annotations

from typing import Any

from foundry.evaluate import protocol
from foundry.evaluate.compare import compare
from foundry.evaluate.timing_report import analyze
from foundry.evaluate.verdict import decode, torch_compute_violation
from foundry.types import ScreenedPoint


# a point's build and trial, as the worker timed it; the first point that ran also carries
# the prebuild's wall seconds and how many points it built (screen_run.prebuild_points)
WORKER_PARTS = ("load_s", "construct_s", "inputs_s", "run_s", "prebuild_s", "prebuilt_points")


def worker_parts(reported: Any) -> dict[str, float]:
    """The worker's own split of a point's build and trial (advisory, for the breakdown
    only: names outside WORKER_PARTS and values that are not plain non-negative numbers
    are dropped)."""
    if not isinstance(reported, dict):
        return {}
    return {name: round(float(v), 4) for name, v in reported.items()
            if name in WORKER_PARTS and type(v) in (int, float) and 0 <= v < 1e6}


class ScreenCollector:
    """Turns a screen job's messages into one `ScreenedPoint` per point."""

    def __init__(self, *, points: tuple, reference: Any, atol: float, rtol: float,
                 reference_ops: frozenset, launch_key: str | None, allow_torch_ops: bool):
        self.points = points
        self.reference = reference
        self.atol, self.rtol = atol, rtol
        self.reference_ops = reference_ops
        self.launch_key = launch_key
        self.allow_torch_ops = allow_torch_ops
        self.errors: dict[int, str] = {}
        self.checked: set[int] = set()
        self.runtime_ms: dict[int, float] = {}
        self._timing_start: dict[int, float] = {}
        self._timing_end: dict[int, float] = {}
        self._last_at: float | None = None  # the previous message's arrival
        self.seconds: dict[int, dict[str, float]] = {}

    def _point(self, header: dict) -> int | None:
        k = header.get("point")
        return k if type(k) is int and 0 <= k < len(self.points) else None

    def drop_reference(self) -> None:
        """Every point is compared (the job ended): let go of the reference output."""
        self.reference = None

    def on_message(self, msg: Any) -> None:
        kind = msg.header.get("kind")
        k = self._point(msg.header)
        previous, self._last_at = self._last_at, msg.at
        if k is None:
            return
        if kind in ("screen_error", "screen_trial") and k not in self.seconds and previous is not None:
            self.seconds[k] = {"build_trial_s": round(max(0.0, msg.at - previous), 4)}
        if kind == "screen_error":
            self.errors.setdefault(k, str(msg.header.get("error", ""))[-1500:])
        elif kind == "screen_trial":
            self.seconds.setdefault(k, {}).update(worker_parts(msg.header.get("parts")))
            self._check_output(k, msg)
        elif kind == "timing_start":
            self._timing_start[k] = msg.at
            if not self._timing_start.keys() - {k} and previous is not None:
                # the first timed point: from the worker's idle (every point built) to its
                # timed window, the wait for the device to itself and the point's warm-up
                self.seconds.setdefault(k, {})["device_wait_s"] = round(max(0.0, msg.at - previous), 4)
        elif kind == "timing_end":
            self._timing_end[k] = msg.at
        elif kind == "screen_timing":
            if k in self._timing_start:
                self.seconds.setdefault(k, {})["timing_s"] = round(max(0.0, msg.at - self._timing_start[k]), 4)
            v = analyze(msg.header, started_at=self._timing_start.get(k),
                        ended_at=self._timing_end.get(k, msg.at))
            if v.flags:
                self.errors.setdefault(k, f"timing: {v.reason or ', '.join(v.flags)}")
            elif v.runtime_ms:
                self.runtime_ms[k] = v.runtime_ms
        msg.tensors.clear()  # nothing is kept: one output at a time on the judge's side

    def _check_output(self, k: int, msg: Any) -> None:
        h = msg.header
        try:
            got = decode(msg)
        except protocol.ProtocolError as e:
            self.errors.setdefault(k, f"protocol: {e}")
            return
        c = compare(self.reference, got, atol=self.atol, rtol=self.rtol)
        del got
        if not c.ok:
            self.errors.setdefault(k, c.message)
        elif h.get("inputs_changed"):
            self.errors.setdefault(k, "forward changed its inputs")
        elif not self.allow_torch_ops and self.launch_key and h.get("launches", 0) == 0:
            self.errors.setdefault(k, f"no {self.launch_key} kernel was launched")
        elif not self.allow_torch_ops and isinstance(h.get("torch_ops"), dict) and torch_compute_violation(
                set(map(str, h["torch_ops"])), set(self.reference_ops)):
            self.errors.setdefault(k, "forward computed with PyTorch ops")
        self.checked.add(k)

    def results(self, *, job_error: str = "") -> tuple:
        out = []
        for k, params in enumerate(self.points):
            seconds = dict(self.seconds.get(k, {}))
            if k in self.errors:
                out.append(ScreenedPoint(dict(params), False, None, self.errors[k], seconds=seconds))
            elif k in self.checked and k in self.runtime_ms:
                out.append(ScreenedPoint(dict(params), True, self.runtime_ms[k], seconds=seconds))
            else:
                out.append(ScreenedPoint(dict(params), False, None,
                                         job_error or "the screen ended before this point was timed", seconds=seconds))
        return tuple(out)
