"""Elites' hardware profiles (foundry.evaluate.hardware_profile) with a stand-in for
Nsight Compute: the counters and diagnosis a profile gives, the device held alone while
ncu runs, the isolation asked for, one profile per candidate, and the fallback where ncu
cannot read the counters."""

from __future__ import annotations

import pytest

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
    profiler = HardwareProfiler(device="cuda", gate=gate, run_ncu=ncu, ncu_first_estimate_s=0.0)
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
    profiler = HardwareProfiler(device="cuda", run_ncu=ncu, ncu_first_estimate_s=0.0)
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


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class SlowNcu(StandInNcu):
    """Nsight Compute taking `seconds` of the device per profile."""

    def __init__(self, report: NcuReport, clock: Clock, seconds: float):
        super().__init__(report)
        self.clock, self.seconds = clock, seconds

    def __call__(self, **kw):
        self.clock.now += self.seconds
        return super().__call__(**kw)


def _elite(k: int) -> tuple[Candidate, EvalResult]:
    cand = Candidate.make(task_id="t", source=SOURCE + f"# variant {k}\n", backend="triton")
    return cand, EvalResult(candidate_id=cand.candidate_id, task_id="t", stage=int(Stage.CORRECT), correct=True,
                            metrics={"roofline": ROOFLINE})


def test_ncu_gets_at_most_its_share_of_the_time_and_the_other_elites_say_why():
    clock = Clock()
    ncu = SlowNcu(NcuReport(True, {"dram_throughput_pct": 50.0}, ("relu_kernel",), "1 kernel launch profiled"),
                  clock, seconds=10.0)
    profiler = HardwareProfiler(device="cuda", run_ncu=ncu, ncu_share=0.1, ncu_first_estimate_s=10.0, clock=clock)
    sources = []
    for k in range(80):  # an elite every 5 s for 400 s
        held = len(ncu.calls) * 10.0
        profile = profiler.profile(task=_task(), candidate=_elite(k)[0], result=_elite(k)[1])
        sources.append(profile.source)
        if profile.source is ProfileSource.DEVICE_PROFILER:
            assert "its share of the device" in profile.note and profile.diagnosis
        else:  # this profile fitted in the share of the time before it began
            assert held + 10.0 <= 0.1 * (clock.now - 10.0)
        clock.now += 5.0
    # the share is earned before the first profile, and never overrun
    assert sources[0] is ProfileSource.DEVICE_PROFILER and ProfileSource.NCU in sources
    assert 2 <= len(ncu.calls) and len(ncu.calls) * 10.0 <= 0.1 * clock.now


def test_a_share_of_zero_never_runs_ncu_and_a_bad_share_is_refused():
    ncu = StandInNcu(NcuReport(True, {"dram_throughput_pct": 1.0}, ("k",), "1 kernel launch profiled"))
    profile = HardwareProfiler(device="cuda", run_ncu=ncu, ncu_share=0.0).profile(
        task=_task(), candidate=_judged()[0], result=_judged()[1])
    assert profile.source is ProfileSource.DEVICE_PROFILER and "off" in profile.note and ncu.calls == []
    with pytest.raises(ValueError, match="ncu_share"):
        HardwareProfiler(device="cuda", run_ncu=ncu, ncu_share=1.5)


def test_ncu_is_asked_for_the_candidate_kernels_only(tmp_path, monkeypatch):
    """A stand-in `ncu` on PATH records its command line and answers with one CSV row."""
    import json
    import os
    import stat

    from foundry.hardware import NCU_METRICS, ncu_profile
    header = ",".join(f'"{h}"' for h in ["ID", "Kernel Name", *NCU_METRICS.values()])
    units = ",".join('""' for _ in range(len(NCU_METRICS) + 2))
    row = ",".join(f'"{v}"' for v in ["0", "relu_kernel", "12", "40", "60", "30", "32", "0", "0", "1000"])
    args_file = tmp_path / "args.json"
    script = tmp_path / "bin" / "ncu"
    script.parent.mkdir()
    script.write_text("#!/usr/bin/env python3\nimport json, sys\n"
                      f"json.dump(sys.argv[1:], open({str(args_file)!r}, 'w'))\n"
                      f"print({header!r}); print({units!r}); print({row!r})\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ['PATH']}")
    report = ncu_profile(task_path="t.py", candidate_path="c.py", kernel_names=iter(["relu_kernel", "_bias_add"]))
    args = json.loads(args_file.read_text())
    assert args[args.index("--kernel-name") + 1] == "regex:_bias_add|relu_kernel"
    assert args[args.index("--launch-count") + 1] == "4"
    assert report.ok and report.kernels == ("relu_kernel",) and report.metrics["dram_throughput_pct"] == 40.0
