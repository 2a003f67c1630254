"""Hardware metrics of a judged candidate's own kernels, measured outside its timed region
(a GPU run profiles each candidate that enters an archive as an elite).

Nsight Compute where it runs and reads the counters (foundry.hardware.ncu_profile, in the
judge's isolation, with the device to itself: no lane times anything meanwhile);
otherwise what the judge's own profiled trial saw (metrics["kernels"]) with the roofline
position. Either way a one-line diagnosis, and the profile says which source it came
from. Nsight Compute holds the device alone for seconds per candidate (a process start,
a build, kernel replays), so it gets at most `ncu_share` of the evaluator's time since it
started, the profile about to run counted in (at the size of the last one, or
NCU_FIRST_ESTIMATE_S before any): an elite that arrives while that share is spent gets the
judge's profile, and its note says so. A short run may so have no Nsight Compute profile
at all: half a minute of the device alone, every lane stopped, is a tenth of a
five-minute run. `HardwareProfile.as_metrics()` is what goes into the result's
metrics (and so into the evaluation log, the report and the next prompt for that parent)."""

from __future__ import annotations

import contextlib
import enum
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from foundry.types import Candidate, EvalResult, Task


NCU_FIRST_ESTIMATE_S = 30.0  # one Nsight Compute profile at published sizes on an H200: 28-30 s


class ProfileSource(str, enum.Enum):
    NCU = "ncu"  # Nsight Compute counters of the candidate's own kernels
    DEVICE_PROFILER = "torch-profiler"  # the judge's per-kernel times and the roofline position only


@dataclass(frozen=True)
class HardwareProfile:
    source: ProfileSource
    diagnosis: str
    note: str = ""  # why the source is what it is (e.g. ncu's own message)
    counters: dict = field(default_factory=dict)  # foundry.hardware.NCU_METRICS names -> values (ncu only)
    seconds: float = 0.0  # wall time the profile took

    def as_metrics(self) -> dict:
        """What a result's metrics gain: "hardware" (source, diagnosis, note, seconds) and
        each counter as `ncu_<name>`."""
        out: dict[str, Any] = {"hardware": {"source": self.source.value, "diagnosis": self.diagnosis,
                                            "note": self.note, "profile_s": round(self.seconds, 3)}}
        out.update({f"ncu_{k}": v for k, v in self.counters.items()})
        return out


class HardwareProfiler:
    """Profiles correct GPU results, one at a time per device, each candidate once.
    `gate`: the evaluator's DeviceGate: a profile reserves the device memory of one forward
    of the task, then has the device to itself; `run_ncu`: foundry.hardware.ncu_profile (a
    stand-in in tests); `ncu_share`: the most of the time since this profiler was made that
    Nsight Compute may hold the device (0: never run it), the next profile counted in at
    `ncu_first_estimate_s` until one has run; `clock`: seconds (tests)."""

    def __init__(self, *, device: str, gate: Any = None, run_ncu: Callable[..., Any] | None = None,
                 timeout_s: float = 120.0, ncu_share: float = 0.05,
                 ncu_first_estimate_s: float = NCU_FIRST_ESTIMATE_S,
                 clock: Callable[[], float] = time.monotonic):
        if not 0.0 <= float(ncu_share) <= 1.0:
            raise ValueError(f"ncu_share must be between 0 and 1, got {ncu_share!r}")
        self.device = device
        self.gate = gate
        self.timeout_s = float(timeout_s)
        self.ncu_share = float(ncu_share)
        self.clock = clock
        self._started = clock()  # the share counts from here (the evaluator's start)
        self._ncu_s = 0.0  # seconds Nsight Compute has held the device so far
        self._next_ncu_s = float(ncu_first_estimate_s)  # the next profile's expected hold: the last one's
        if run_ncu is None:
            from foundry.hardware import ncu_profile
            run_ncu = ncu_profile
        self.run_ncu = run_ncu
        self._lock = threading.Lock()
        self._done: dict[str, HardwareProfile] = {}
        self._ncu_broken = ""  # set once ncu cannot run here at all: later elites skip it

    def profile(self, *, task: Task, candidate: Candidate, result: EvalResult) -> HardwareProfile | None:
        """The candidate's profile (None off the GPU or for an incorrect result)."""
        if self.device != "cuda" or not result.correct:
            return None
        with self._lock:
            done = self._done.get(candidate.candidate_id)
            if done is None:
                done = self._done[candidate.candidate_id] = self._measure(task, candidate, result)
            return done

    def _measure(self, task: Task, candidate: Candidate, result: EvalResult) -> HardwareProfile:
        from foundry.evaluate.cuda_device import kernel_names_in_source
        from foundry.hardware import hardware_diagnosis
        metrics = result.metrics or {}
        roofline = metrics.get("roofline") if isinstance(metrics.get("roofline"), dict) else None
        kernels = metrics.get("kernels") if isinstance(metrics.get("kernels"), dict) else None
        started = self.clock()
        note = self._ncu_broken or self._share_spent(started)
        if not note:
            with tempfile.TemporaryDirectory(prefix="foundry-profile-") as folder:
                path = Path(folder) / "candidate.py"
                path.write_text(candidate.source)
                with self._device_alone(task):
                    held_from = self.clock()
                    try:
                        report = self.run_ncu(task_path=task.path, candidate_path=str(path),
                                              params=dict(candidate.params or {}),
                                              kernel_names=kernel_names_in_source(candidate.source,
                                                                                  candidate.backend),
                                              profile=task.size_profile, timeout_s=self.timeout_s, isolated=True)
                    finally:
                        self._next_ncu_s = self.clock() - held_from
                        self._ncu_s += self._next_ncu_s
            if report.ok:
                counters = {k: round(float(v), 4) for k, v in report.metrics.items()}
                return HardwareProfile(source=ProfileSource.NCU, counters=counters, note=report.note,
                                       diagnosis=hardware_diagnosis(ncu=counters, roofline=roofline, kernels=kernels),
                                       seconds=self.clock() - started)
            note = report.note
            if report.unavailable:
                self._ncu_broken = note  # the machine's state, not this candidate's: not asked again
        return HardwareProfile(source=ProfileSource.DEVICE_PROFILER, note=note,
                               diagnosis=hardware_diagnosis(roofline=roofline, kernels=kernels),
                               seconds=self.clock() - started)

    def _share_spent(self, now: float) -> str:
        """Why Nsight Compute may not run now ("" when it may): its time so far and the
        profile it would run now must fit in its share of the time since the start."""
        if self.ncu_share <= 0.0:
            return "Nsight Compute is off for this run (ncu_share 0): the judge's profile"
        since = now - self._started
        if self._ncu_s + self._next_ncu_s > self.ncu_share * since:
            return (f"Nsight Compute has had its share of the device ({self._ncu_s:.0f} s of {since:.0f} s, at most "
                    f"{self.ncu_share:.0%}, the next profile counted in at {self._next_ncu_s:.0f} s): "
                    f"the judge's profile for this elite")
        return ""

    @contextlib.contextmanager
    def _device_alone(self, task: Task) -> Iterator[None]:
        """Memory for one forward of the task (as a screen reserves it), then the device
        to this profile alone; nothing without a gate."""
        if self.gate is None:
            yield
            return
        from foundry.evaluate.task_size import meta_size
        size = meta_size(task)
        with self.gate.memory(size.screen_bytes() if size is not None else 0), self.gate.exclusive():
            yield

