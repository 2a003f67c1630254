"""The GPU judge's pure parts, tested on the CPU: fault classes, own-kernel attribution,
timing config and statistics, Nsight Compute CSV parsing, hardware prompt text."""

from __future__ import annotations

import dataclasses

import pytest

from foundry.config_keys import ConfigError
from foundry.evaluate import cuda_device as cd
from foundry.evaluate import cuda_timing as ct
from foundry import hardware
from foundry.tasks.roofline import DeviceCeilings


@pytest.mark.parametrize("text,kind,sticky", [
    ("torch.AcceleratorError: CUDA error: an illegal memory access was encountered", "illegal_address", True),
    ("RuntimeError: CUDA error: misaligned address", "misaligned_address", True),
    ("CUDA error: device-side assert triggered", "device_assert", True),
    ("CUDA driver: launching k failed: CUDA_ERROR_LAUNCH_FAILED", "launch_failure", True),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 200.00 GiB", "out_of_memory", False),
    ("CUDA error: invalid configuration argument", "invalid_configuration", False),
    ("ValueError: shapes do not match", None, False),
])
def test_fault_classes(text, kind, sticky):
    assert cd.classify_cuda_error(text) == kind
    assert cd.context_is_lost(text) is sticky


def test_own_kernels_matched_by_name_even_when_mangled():
    runs = [cd.KernelRun("scale(float*, float, int)", 4.0, 1), cd.KernelRun("ew_relu", 6.0, 1),
            cd.KernelRun("void at::native::vectorized_elementwise_kernel<4>", 10.0, 1)]
    chk = cd.check_own_kernels(runs, expected={"scale", "ew_relu"})
    assert chk.ok and set(chk.own) == {"scale(float*, float, int)", "ew_relu"}
    assert chk.own_time_fraction == pytest.approx(0.5)
    # a name that only occurs inside a longer identifier does not count
    chk = cd.check_own_kernels([cd.KernelRun("rescale_kernel", 1.0, 1)], expected={"scale"})
    assert not chk.ok and "none of the candidate's kernels ran" in chk.note


def test_without_names_any_kernel_the_reference_lacks_is_own():
    ref = {"void at::native::vectorized_elementwise_kernel<4>"}
    only_torch = [cd.KernelRun("void at::native::vectorized_elementwise_kernel<4>", 3.0, 1)]
    assert not cd.check_own_kernels(only_torch, reference=ref).ok
    assert cd.check_own_kernels(only_torch + [cd.KernelRun("my_kernel", 1.0, 1)], reference=ref).ok
    assert cd.check_own_kernels([], reference=ref).note == "no CUDA kernel ran at all"


def test_kernel_names_in_source_per_backend():
    cu = 'extern "C" __global__ void __launch_bounds__(256) a(float* x) {}\n__global__ void b() {}'
    assert cd.kernel_names_in_source(cu, "cuda") == {"a", "b"}
    tr = "@triton.jit\ndef add_kernel(X):\n    pass\n@triton.autotune(configs=[])\n@triton.jit\ndef k2(X):\n    pass\n"
    assert cd.kernel_names_in_source(tr, "triton") == {"add_kernel", "k2"}


def test_static_patterns_catch_streams_and_timer_patching():
    import re
    pats = cd.CudaDevice().static_patterns()
    hit = lambda flag, src: any(re.search(p, src) for p in pats[flag])  # noqa: E731
    assert hit("streams", "s = torch.cuda.Stream()\nwith torch.cuda.stream(s): pass")
    assert hit("timer_patching", "torch.cuda.Event.elapsed_time = lambda a, b: 0.0")
    assert hit("allocator_tampering", "torch.use_deterministic_algorithms(False)")
    assert not hit("streams", "torch.cuda.current_stream()")


def test_timing_config_rejects_unknown_keys_and_bad_policy():
    assert ct.GpuTimingConfig.from_config({"tf32": "on"}).tf32 == "on"
    with pytest.raises(ConfigError, match=r"unknown key 'gpu_timing\.warmup'; allowed: warmup_ms, "):
        ct.GpuTimingConfig.from_config({"warmup": 1})
    with pytest.raises(ValueError, match="tf32"):
        ct.GpuTimingConfig.from_config({"tf32": "maybe"})
    with pytest.raises(ValueError, match="launch_cover_us"):
        ct.GpuTimingConfig.from_config({"launch_cover_us": -1})


def test_median_ci_narrows_with_agreeing_samples():
    tight = sorted([1.0 + 0.001 * (i % 3) for i in range(60)])
    loose = sorted([1.0 + 0.2 * (i % 5) for i in range(60)])
    assert ct._median_ci(tight) < 0.01 < ct._median_ci(loose)
    assert ct._quantile([1.0, 2.0, 3.0], 0.5) == 2.0


NCU_CSV = '''==PROF== Connected to process 1
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed","gpu__time_duration.sum","lts__t_sector_hit_rate.pct","sm__throughput.avg.pct_of_peak_sustained_elapsed","sm__warps_active.avg.pct_of_peak_sustained_active"
"","","","","","","","","","","","%","ns","%","%","%"
"0","1","python","h","ew_relu","1","7","(256, 1, 1)","(8448, 1, 1)","0","9.0","90","300","10","20","80"
"1","1","python","h","void at::native::elementwise<4>","1","7","(128, 1, 1)","(100, 1, 1)","0","9.0","50","100","50","40","60"
"2","1","python","h","ew_relu","1","7","(256, 1, 1)","(8448, 1, 1)","0","9.0","70","100","30","40","60"
'''


def test_ncu_csv_weighted_by_duration_over_own_kernels():
    rep = hardware.parse_ncu_csv(NCU_CSV, kernel_names=["ew_relu"])
    assert rep.ok and rep.kernels == ("ew_relu",)
    assert rep.metrics["dram_throughput_pct"] == pytest.approx((90 * 300 + 70 * 100) / 400)
    assert rep.metrics["achieved_occupancy_pct"] == pytest.approx((80 * 300 + 60 * 100) / 400)
    assert rep.metrics["duration_ns_total"] == 400
    assert rep.metrics["kernel_count"] == 1 and rep.metrics["launches"] == 2
    assert not hardware.parse_ncu_csv(NCU_CSV, kernel_names=["missing"]).ok
    assert not hardware.parse_ncu_csv("==ERROR== LibraryNotLoaded").ok


def test_the_hardware_diagnosis_reads_the_roofline_the_counters_and_the_kernel_count():
    line = hardware.hardware_diagnosis(
        ncu={"dram_throughput_pct": 38.2, "sm_throughput_pct": 12.0, "achieved_occupancy_pct": 61.0,
             "l2_hit_rate_pct": 30.0, "registers_per_thread": 40.0, "shared_mem_static_bytes": 0.0,
             "shared_mem_dynamic_bytes": 8192.0, "kernel_count": 3},
        roofline={"bound": "memory", "fraction": 0.41})
    assert line == ("memory-bound at 41% of the floor; DRAM 38% of peak, SM 12%, occupancy 61%, L2 hit 30%; "
                    "40 registers per thread, 8 KiB shared memory per block; 3 kernels where one would do")
    fallback = hardware.hardware_diagnosis(roofline={"bound": "compute", "fraction": 0.8},
                                           kernels={"kernel_times_us": [["a", 1.0, 1], ["b", 2.0, 1]]})
    assert fallback == "compute-bound at 80% of the floor; 2 kernels"
    assert hardware.hardware_diagnosis() == ""


def test_prompt_text_names_the_ceilings():
    info = hardware.HardwareInfo(
        name="NVIDIA H200", capability="9.0", sm_count=132, l2_bytes=60 << 20,
        shared_mem_per_block=48 << 10, shared_mem_per_block_optin=227 << 10,
        shared_mem_per_sm=228 << 10, registers_per_block=65536, registers_per_sm=65536,
        max_threads_per_sm=2048, warp_size=32, total_memory_bytes=140 << 30,
        copy_bytes_per_s=4.1e12, fp32_matmul_flops_per_s=50.5e12, torch_version="2.11",
        cuda_version="13.0", driver_version="13.0", measured_at="now")
    text = hardware.prompt_text(info)
    assert "132 SMs" in text and "60 MiB" in text and "227 KiB opt-in" in text
    assert "4.10 TB/s" in text and "50.5 TFLOP/s" in text
    facts = hardware.prompt_facts(info)  # the prompts' hardware section, one line each
    assert list(facts) == ["device", "memory", "registers and threads", "measured", "software"]
    assert facts["device"].startswith("NVIDIA H200, compute capability 9.0 (sm_90), 132 SMs")
    cpu = hardware.cpu_prompt_facts(threads=2)
    assert cpu["device"].startswith("CPU ") and "2 thread(s) per candidate" in cpu["device"]
    c = hardware.ceilings(info)
    assert c.bandwidth_bytes_per_s == 4.1e12 and c.flops_per_s == 50.5e12
    assert c.half_flops_per_s == DeviceCeilings().half_flops_per_s and "bf16 matmul: the anchor" in c.source
    measured = hardware.ceilings(dataclasses.replace(info, bf16_matmul_flops_per_s=700e12))
    assert measured.half_flops_per_s == 700e12 and "anchor" not in measured.source
    assert "bf16 matmul 700 TFLOP/s" in hardware.prompt_facts(dataclasses.replace(info, bf16_matmul_flops_per_s=700e12))["measured"]


def test_models_move_to_the_device_with_their_parameters():
    import torch

    moved = []

    class Recorder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(3))

        def to(self, *args, **kwargs):  # stands in for the CUDA move on a machine without a GPU
            moved.append(args)
            return self

    model = Recorder()
    assert cd.CudaDevice().to_device(model) is model and moved == [("cuda",)]
    assert cd.CudaDevice().to_device(7) == 7


def test_a_call_is_judged_launch_bound_only_when_back_to_back_it_is_clearly_slower():
    from foundry.evaluate.cuda_timing import GpuTimingConfig, judged_time
    kw = dict(host_ms=0.5, host_check_ok=True, launch_bound_ratio=1.1)
    assert judged_time(event_ms=0.030, back_to_back_ms=0.085, **kw) == (0.085, True)  # the host bounds it
    assert judged_time(event_ms=0.030, back_to_back_ms=0.032, **kw) == (0.030, False)  # noise, not the host
    assert judged_time(event_ms=3.0, back_to_back_ms=2.7, **kw) == (3.0, False)  # L2 warm back to back: never faster
    assert judged_time(event_ms=0.030, back_to_back_ms=0.0, **kw) == (0.030, False)  # not measured
    # the host cross-check failing (work the events did not see) still wins
    assert judged_time(event_ms=0.030, back_to_back_ms=0.085, host_ms=0.5, host_check_ok=False,
                     launch_bound_ratio=1.1) == (0.5, False)
    for bad in ({"back_to_back_ms": -1.0}, {"launch_bound_ratio": 0.9}):
        with pytest.raises(ValueError, match="back_to_back_ms >= 0 and launch_bound_ratio >= 1"):
            GpuTimingConfig.from_config(bad)


@pytest.fixture
def host_clock_events(monkeypatch):
    """cuda_timing's events, syncs and stream on the host clock (no GPU): an event's time
    is the host's when it was recorded, so a trial's event time is its host time."""
    import time

    import torch

    from foundry.evaluate import cuda_timing as ct

    class HostEvent:
        def __init__(self, enable_timing=True):
            self.at = None

        def record(self, stream=None):
            self.at = time.perf_counter()

    monkeypatch.setattr(ct, "_Event", HostEvent)
    monkeypatch.setattr(ct, "_elapsed", lambda a, b: (b.at - a.at) * 1e3)
    monkeypatch.setattr(ct, "_sync", lambda: None)
    monkeypatch.setattr(ct, "_sleep", None)
    monkeypatch.setattr(ct, "l2_flush_buffer", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: type("Stream", (), {"cuda_stream": 0})())
    return ct


def _changing_sets():
    import torch
    sets = [[torch.randn(1000)], [torch.randn(1000)]]
    original = [s[0].clone() for s in sets]
    changes = [0]

    def on_block():  # as the worker does: x/2, x/4, x/2, ... in place before every trial
        factor = 0.5 if changes[0] == 0 or changes[0] % 2 == 1 else 2.0
        changes[0] += 1
        for s in sets:
            s[0].mul_(factor)
    return sets, original, on_block


def _expected(original, changes):
    import torch
    return torch.relu(original * (1 if changes == 0 else (0.5 if changes % 2 else 0.25)))


def test_the_launch_bound_check_never_supplies_the_outputs_the_judge_checks(host_clock_events):
    """Exploit: skip the work in every timed trial (its inputs changed since its last call)
    and compute, once, only when called back to back on unchanged inputs. The outputs the
    judge checks must be the trials' own, so its garbage is seen."""
    import time

    import torch

    class SkipsTimedTrials:
        def __init__(self):
            self.seen, self.cache = {}, {}

        def __call__(self, x):
            if self.seen.get(x.data_ptr()) != x._version:
                self.seen[x.data_ptr()] = x._version
                return torch.full_like(x, float("nan"))  # a timed trial: no work
            key = (x.data_ptr(), x._version)
            if key not in self.cache:
                time.sleep(0.002)
                self.cache[key] = torch.relu(x)
            return self.cache[key]

    model = SkipsTimedTrials()
    sets, original, on_block = _changing_sets()
    res = host_clock_events.time_forward(lambda inputs: model(*inputs), sets, clock=time.perf_counter_ns,
                                         params={"min_ms": 20, "warmup_ms": 2}, on_block=on_block)
    for k, out in enumerate(res["last_outputs"]):
        assert not torch.allclose(out, _expected(original[k], res["last_input_changes"][k]))


def test_a_launch_bound_call_has_every_trial_raised_to_its_back_to_back_time(host_clock_events):
    """A call that spends 0.5 ms on the host where no trial's events see it (as the launch
    cover hides a slow launch): judged at its back-to-back time per call, every trial."""
    import statistics
    import time

    import torch
    ct = host_clock_events
    sets, original, on_block = _changing_sets()
    in_trial = [False]
    real_record = ct._Event.record

    def record(self, stream=None):  # the events of a trial bracket nothing of the host's spin
        real_record(self, stream)
        in_trial[0] = not in_trial[0]
    ct._Event.record = record

    def slow_host(inputs):
        if not in_trial[0]:
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < 0.5e-3:
                pass
        return torch.relu(inputs[0])

    res = ct.time_forward(slow_host, sets, clock=time.perf_counter_ns, params={"min_ms": 20, "warmup_ms": 2},
                          on_block=on_block)
    gpu = res["gpu"]
    assert gpu["launch_bound"] and gpu["back_to_back_ms"] >= 0.5
    assert gpu["event_median_ms"] < 0.1 and min(res["block_ns"]) >= int(gpu["back_to_back_ms"] * 1e6)
    assert statistics.median(res["block_ns"]) / 1e6 == pytest.approx(gpu["back_to_back_ms"], rel=0.01)
    for k, out in enumerate(res["last_outputs"]):  # the trials' own outputs
        torch.testing.assert_close(out, _expected(original[k], res["last_input_changes"][k]))
