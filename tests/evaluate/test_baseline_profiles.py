"""Each task's eager and torch.compile baselines carry what their forward launched (on a
GPU, profiled once after both timed runs: a profiler session slows the process's later
launches): kept in the baseline cache, put into every
correct result's metrics, and never the baseline's failure."""

from __future__ import annotations

import textwrap
from pathlib import Path
from types import SimpleNamespace

import torch

from foundry.evaluate import EvalConfig, Evaluator
from foundry.evaluate.baselines import Baseline, BaselineCache, baseline_key
from foundry.evaluate.harness import Worker
from foundry.hardware import baseline_line
from foundry.tasks import load_task
from foundry.types import Candidate

ROOT = Path(__file__).resolve().parents[2]
HONEST = (ROOT / "tests" / "exploits" / "candidates" / "honest_relu_c.py").read_text()
EAGER = {"kernels": 2, "launches": 3, "device_us": 41.5,
         "kernel_times_us": [["vectorized_elementwise_kernel", 30.0, 2], ["reduce_kernel", 11.5, 1]]}


class _Profiling:
    """A device that can say what a call launched (as CudaDevice.kernel_summary does)."""

    name = "cpu"  # where models are built (the device protocol's name)

    def __init__(self):
        self.calls = 0

    def kernel_summary(self, call):
        call()
        self.calls += 1
        return dict(EAGER)


def _worker(device) -> Worker:
    worker = Worker.__new__(Worker)  # only what profile_baseline (and, given variants, run_baseline) uses
    worker.device = device
    worker.trials = []
    worker.job = SimpleNamespace(timing=SimpleNamespace(sets=[0]))
    worker.fresh_inputs = lambda index: [torch.ones(8)]
    return worker


def test_a_baseline_is_profiled_where_the_device_can_and_a_failed_profile_is_only_a_note():
    seen = []
    device = _Profiling()
    assert _worker(device).profile_baseline(lambda x: seen.append(x.sum().item())) == EAGER
    assert device.calls == 1 and seen == [8.0]

    def broken(x):
        raise RuntimeError("profiler unavailable")
    assert _worker(device).profile_baseline(broken) == {"error": "RuntimeError: profiler unavailable"}
    assert _worker(SimpleNamespace(name="cpu")).profile_baseline(lambda x: x) is None  # no profiler: nothing


def test_the_cache_keeps_a_baselines_kernels_and_results_carry_them(tmp_path):
    cache = BaselineCache(str(tmp_path / "baselines"))
    cache.put("00ff00ff00ff00ff", Baseline(eager_ms=2.0, compile_ms=1.5, eager_kernels=EAGER))
    got = BaselineCache(str(tmp_path / "baselines")).get("00ff00ff00ff00ff")
    assert got.eager_kernels == EAGER and got.compile_kernels is None

    relu = load_task(ROOT / "benchmarks" / "smoke" / "relu.py")
    ev = Evaluator(config=EvalConfig.from_config({"trials": 3, "timeout_s": 15, "compile_baseline": False,
                                                  "timing_min_ms": 50,
                                                  "baseline_cache_dir": str(tmp_path / "baselines")}))
    try:
        key = baseline_key(relu, device="cpu", hardware=ev.hardware, threads=ev.config.threads)
        cache.put(key, Baseline(eager_ms=2.0, compile_ms=None, eager_kernels=EAGER))
        r = ev.evaluate(task=relu, candidate=Candidate.make(task_id=relu.task_id, backend="c",
                                                            source=textwrap.dedent(HONEST)))
    finally:
        ev.close()
    assert r.correct and r.eager_ms == 2.0
    assert r.metrics["baseline_kernels"] == {"eager": EAGER}


def test_one_line_on_a_baseline():
    assert baseline_line(EAGER, fraction=0.413) == ("41% of the floor; 3 launches of 2 kernels, the slowest "
                                                    "vectorized_elementwise_kernel (30 us)")
    assert baseline_line(None, fraction=0.5) == "50% of the floor"
    one = {"kernels": 1, "launches": 1, "kernel_times_us": [["softmax_kernel", 812.0, 1]]}
    assert baseline_line(one) == "1 launch of 1 kernel, the slowest softmax_kernel (812 us)"
    assert baseline_line({"error": "x"}) == ""


def test_a_baseline_jobs_outcome_carries_each_forwards_kernels():
    from foundry.evaluate.baselines import baseline_from
    from foundry.evaluate.phases import PhaseTimes
    from foundry.evaluate.sandbox import JobOutcome, Message
    compiled = {"kernels": 1, "launches": 1, "kernel_times_us": [["triton_poi_fused_relu_0", 20.0, 1]]}

    def timed(which, at):
        header = {"kind": "baseline", "which": which, "block_ns": [int(2e6)] * 5, "calls_per_block": 1}
        return [Message({"kind": "timing_start"}, [], at), Message({"kind": "timing_end"}, [], at + 0.0101),
                Message(header, [], at + 0.0102)]
    profiles = Message({"kind": "baseline_kernels", "eager": EAGER, "compile": compiled}, [], 3.0)
    out = JobOutcome(messages=timed("eager", 1.0) + timed("compile", 2.0) + [profiles], started_at=0.5)
    b = baseline_from(out, PhaseTimes())
    assert b.eager_ms == 2.0 and b.compile_ms == 2.0 and not b.error
    assert b.eager_kernels == EAGER and b.compile_kernels == compiled
    plain = baseline_from(JobOutcome(messages=timed("eager", 1.0), started_at=0.5), PhaseTimes())
    assert plain.eager_ms == 2.0 and plain.eager_kernels is None  # a CPU baseline: no profile
    assert not plain.error
    # torch.compile was to be timed too, and the worker ended without it or a word on why
    ended = JobOutcome(messages=timed("eager", 1.0), started_at=0.5, status=11 << 8)
    no_compile = baseline_from(ended, PhaseTimes(), compile_expected=True)
    assert no_compile.eager_ms == 2.0 and no_compile.compile_ms is None
    assert no_compile.error == "worker exited with code 11"


def test_the_baselines_are_profiled_after_both_timed_runs(monkeypatch):
    """A profiler session leaves the process's later launches slower (measured on an H200:
    a bf16 addmm back to back 16-22 us a call before, 30-31 us after), so the baseline job
    times eager and torch.compile first and profiles them last."""
    events, sent = [], []

    class Device(_Profiling):
        def to_device(self, model):
            return model

        def kernel_summary(self, call):
            events.append("profile")
            return super().kernel_summary(call)

    def compile_(model, mode=None):  # the order is what is tested
        def call(*args):
            events.append("compiled call")
            return model(*args)
        return call

    monkeypatch.setattr(torch, "compile", compile_)
    worker = _worker(Device())
    worker.variants = [{"module": SimpleNamespace(Model=torch.nn.ReLU), "init": ()}]
    worker.job = SimpleNamespace(init_seed=0, compile_baseline=True, compile_mode="default",
                                 timing=SimpleNamespace(sets=[0]))
    worker.wait_go = lambda: events.append("go") or True  # each go toggles the device's hold
    worker.time_model = lambda model, timing, *, kind, extra: events.append(f"time {extra['which']}")
    worker.fresh_inputs = lambda index: [torch.ones(2)]
    worker.clock = lambda: 0
    worker.send = sent.append
    worker.run_baseline()
    # torch.compile's first call (Inductor's own autotuning) inside the held section
    timed = [e for e in events if e != "compiled call"]
    assert timed == ["go", "time eager", "go", "go", "time compile", "go", "profile", "profile"]
    assert events.index("compiled call") == 4  # after the compile's go, before its timed runs
    assert sent == [{"kind": "baseline_kernels", "eager": EAGER, "compile": EAGER}]


def test_a_failed_baselines_error_keeps_its_end(tmp_path, monkeypatch):
    # a traceback's last line names the failure; its head is only the call chain
    relu = load_task(ROOT / "benchmarks" / "smoke" / "relu.py")
    trace = "Traceback (most recent call last):\n" + '  File "harness.py", line 1, in time_model\n' * 80
    ev = Evaluator(config=EvalConfig.from_config({"trials": 3, "timeout_s": 15, "compile_baseline": False,
                                                  "timing_min_ms": 50}))
    monkeypatch.setattr(ev, "_baseline", lambda task, phases=None: Baseline(
        eager_ms=None, error=trace + "RuntimeError: the eager forward ran out of memory"))
    try:
        r = ev.evaluate(task=relu, candidate=Candidate.make(task_id=relu.task_id, backend="c",
                                                            source=textwrap.dedent(HONEST)))
    finally:
        ev.close()
    assert r.correct and r.eager_ms is None
    assert r.metrics["baseline_error"].endswith("RuntimeError: the eager forward ran out of memory")


def test_a_baseline_lets_its_trials_inputs_go_before_its_timed_runs_make_their_own():
    """The baseline job's worker builds every trial's inputs, as every job does; its timed
    runs make fresh sets from the same seeds, so holding both would be twice the inputs (at
    full size, the difference between fitting on the device and running out of it)."""
    module = SimpleNamespace(Model=lambda: torch.nn.ReLU())
    worker = Worker.__new__(Worker)
    worker.device = SimpleNamespace(name="cpu", to_device=lambda m: m)
    worker.job = SimpleNamespace(init_seed=1, compile_baseline=False, timing=SimpleNamespace(sets=[0, 1]))
    worker.variants = [{"module": module, "init": []}]
    worker.trials = [{"inputs": [torch.ones(4)]}, {"inputs": [torch.ones(4)]}]
    worker.wait_go = lambda: True
    worker.send = lambda message: None
    held_while_timing = []
    worker.time_model = lambda model, timing, **kw: held_while_timing.append([t["inputs"] for t in worker.trials])
    worker.run_baseline()
    assert held_while_timing == [[None, None]]


def _timing(kind: str, which: str, ms: float, at: float, event_ms: float | None):
    from foundry.evaluate.sandbox import Message
    header = {"kind": kind, "which": which, "block_ns": [int(ms * 1e6)] * 5, "calls_per_block": 1,
              "span_ns": int(ms * 5e6)}
    if event_ms is not None:
        header["gpu"] = {"event_median_ms": event_ms, "launch_bound": True}
    return Message(header=header, tensors=[], at=at)


def test_a_gpu_baseline_keeps_its_time_by_cuda_events_and_a_result_its_speedups_by_them(tmp_path):
    """On a GPU a launch-bound call's judged time is its back-to-back time, mostly the host's
    launch cost; the CUDA-event time (what the GPU spends, all a region costs inside a CUDA
    graph) is kept beside it, for the baselines and in a correct result's `gpu_speedup`."""
    from foundry.evaluate.baselines import baseline_from
    from foundry.evaluate.phases import PhaseTimes
    from foundry.evaluate.sandbox import JobOutcome, Message
    from foundry.evaluate.scoring import score
    from foundry.evaluate.verdict import Findings
    out = JobOutcome(started_at=0.0)
    out.messages = [Message({"kind": "timing_start"}, [], 1.0), _timing("baseline", "eager", 0.044, 1.5, 0.030),
                    Message({"kind": "timing_end"}, [], 1.6), Message({"kind": "timing_start"}, [], 2.0),
                    _timing("baseline", "compile", 0.080, 2.5, 0.024), Message({"kind": "timing_end"}, [], 2.6)]
    b = baseline_from(out, PhaseTimes())
    assert (b.eager_ms, b.compile_ms) == (0.044, 0.080) and (b.eager_gpu_ms, b.compile_gpu_ms) == (0.030, 0.024)
    cache = BaselineCache(str(tmp_path / "baselines"))
    cache.put("00ff00ff00ff00ff", b)
    assert cache.get("00ff00ff00ff00ff") == b

    result_kw: dict = {}
    metrics = {"gpu_timing": {"event_median_ms": 0.020, "median_ms": 0.087, "launch_bound": True,
                              "host_check_ok": True}}
    score(Findings(), b, 0.087, None, metrics, result_kw, recheck_threshold=100.0, recheck=None, phases=PhaseTimes())
    assert result_kw["speedup_eager"] < 1.0  # 0.044 / 0.087 by the judged (back-to-back) times
    assert metrics["gpu_speedup"]["eager"] == 0.030 / 0.020 and metrics["gpu_speedup"]["compile"] == 0.024 / 0.020

    hidden = {"gpu_timing": {"event_median_ms": 0.001, "median_ms": 0.5, "host_check_ok": False}}
    score(Findings(), b, 0.5, None, hidden, {}, recheck_threshold=100.0, recheck=None, phases=PhaseTimes())
    assert "gpu_speedup" not in hidden  # events that missed the work (a side stream) measure nothing

    cpu = {}  # no GPU timing (a CPU run, or an older baseline without event times): no GPU speedups
    score(Findings(), Baseline(eager_ms=2.0, compile_ms=1.0), 1.0, None, cpu, {}, recheck_threshold=100.0,
          recheck=None, phases=PhaseTimes())
    assert "gpu_speedup" not in cpu
