"""Elites' hardware profiles (foundry.evaluate.hardware_profile) with a stand-in for
Nsight Compute: the counters and diagnosis a profile gives, the device held alone while
ncu runs, the isolation asked for, one profile per candidate, and the fallback where ncu
cannot read the counters."""

from __future__ import annotations

from foundry.evaluate.device_gate import DeviceGate
from foundry.evaluate.hardware_profile import HardwareProfiler, ProfileSource
from foundry.hardware import NcuReport
from foundry.types import Candidate, EvalResult, Stage, Task

SOURCE = "import triton\n@triton.jit\ndef relu_kernel(x):\n    pass\nclass ModelNew: ...\n"
ROOFLINE = {"floor_ms": 1.0, "fraction": 0.41, "bound": "memory", "diagnosis": "memory-bound: 41% of the floor"}


def _task() -> Task:
    return Task(task_id="t", path="/tasks/t.py", source="x = 1", size_profile="full")


def _judged(correct: bool = True) -> tuple[Candidate, EvalResult]:
    cand = Candidate.make(task_id="t", source=SOURCE, backend="triton", params={"BLOCK": 256})
    res = EvalResult(candidate_id=cand.candidate_id, task_id="t", stage=int(Stage.CORRECT if correct else Stage.VALUE),
                     correct=correct, runtime_ms=2.0,
                     metrics={"roofline": ROOFLINE, "kernels": {"kernel_times_us": [["relu_kernel", 9.0, 1]]}})
    return cand, res


class StandInNcu:
    def __init__(self, report: NcuReport, gate: DeviceGate | None = None):
        self.report, self.gate, self.calls = report, gate, []

    def __call__(self, **kw):
        self.calls.append({**kw, "held_alone": self.gate.holds_exclusive() if self.gate else None})
        return self.report


def test_an_elite_gets_ncu_counters_and_a_diagnosis_with_the_device_to_itself():
    gate = DeviceGate()
    ncu = StandInNcu(NcuReport(True, {"dram_throughput_pct": 38.24, "sm_throughput_pct": 12.0, "kernel_count": 2,
                                      "registers_per_thread": 32.0}, ("relu_kernel",), "2 kernel launches profiled"),
                     gate)
    profiler = HardwareProfiler(device="cuda", gate=gate, run_ncu=ncu)
    cand, res = _judged()
    profile = profiler.profile(task=_task(), candidate=cand, result=res)
    assert profile.source is ProfileSource.NCU and profile.counters["dram_throughput_pct"] == 38.24
    assert profile.diagnosis.startswith("memory-bound at 41% of the floor; DRAM 38% of peak, SM 12%")
    assert "2 kernels where one would do" in profile.diagnosis
    call = ncu.calls[0]
    assert call["held_alone"] and call["isolated"] is True and call["params"] == {"BLOCK": 256}
    assert "relu_kernel" in call["kernel_names"] and call["profile"] == "full"
    metrics = profile.as_metrics()
    assert metrics["hardware"]["source"] == "ncu" and metrics["ncu_dram_throughput_pct"] == 38.24
    assert profiler.profile(task=_task(), candidate=cand, result=res) is profile and len(ncu.calls) == 1
    assert not gate.holds_exclusive() and gate.snapshot()["reserved_bytes"] == 0


def test_without_counters_the_profile_says_so_and_ncu_is_not_asked_again():
    ncu = StandInNcu(NcuReport(False, {}, (), "ncu cannot read the GPU counters here (ERR_NVGPUCTRPERM): timing only",
                               unavailable=True))
    profiler = HardwareProfiler(device="cuda", run_ncu=ncu)
    first = profiler.profile(task=_task(), candidate=_judged()[0], result=_judged()[1])
    assert first.source is ProfileSource.DEVICE_PROFILER and "ERR_NVGPUCTRPERM" in first.note
    assert first.diagnosis == "memory-bound at 41% of the floor" and not first.counters
    other = Candidate.make(task_id="t", source=SOURCE + "# another\n", backend="triton")
    res = EvalResult(candidate_id=other.candidate_id, task_id="t", stage=int(Stage.CORRECT), correct=True)
    second = profiler.profile(task=_task(), candidate=other, result=res)
    assert second.source is ProfileSource.DEVICE_PROFILER and len(ncu.calls) == 1  # the machine's state: once


def test_nothing_is_profiled_off_the_gpu_or_for_an_incorrect_result():
    ncu = StandInNcu(NcuReport(True, {"dram_throughput_pct": 1.0}, ("k",), "1 kernel launch profiled"))
    assert HardwareProfiler(device="cpu", run_ncu=ncu).profile(task=_task(), candidate=_judged()[0],
                                                                result=_judged()[1]) is None
    wrong = _judged(correct=False)
    assert HardwareProfiler(device="cuda", run_ncu=ncu).profile(task=_task(), candidate=wrong[0],
                                                                 result=wrong[1]) is None
    assert ncu.calls == []
