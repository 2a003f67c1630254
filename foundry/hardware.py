"""The GPU a candidate runs on, described for prompts and for the judge's reports.

- `describe()`: name, compute capability, SM count, L2, shared memory per block (default
  and opt-in), registers, memory, plus the *measured* copy bandwidth and fp32 (TF32 off)
  and bf16 matmul rates, cached per machine in a JSON file (measuring takes a second or two).
- `prompt_facts(info)` / `prompt_text(info)`: the few lines a kernel writer needs
  (`cpu_prompt_facts` on a CPU run).
- `roofline(task, info)` and `RooflineLike.fraction(runtime_ms)`: the task's floor on this
  device (foundry.tasks.roofline) and a candidate's fraction of it.
- `ncu_profile(...)`: Nsight Compute metrics of a candidate's own kernels (SM and DRAM
  throughput, achieved occupancy, L2 hit rate). Where ncu is missing or cannot read the
  counters (some virtualised machines), it returns ok=False with a note, and the judge
  carries on with timing alone.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

NCU_METRICS = {
    "sm_throughput_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram_throughput_pct": "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "l2_hit_rate_pct": "lts__t_sector_hit_rate.pct",
    "registers_per_thread": "launch__registers_per_thread",
    "shared_mem_static_bytes": "launch__shared_mem_per_block_static",
    "shared_mem_dynamic_bytes": "launch__shared_mem_per_block_dynamic",
    "duration_ns": "gpu__time_duration.sum",
}


@dataclass(frozen=True)
class HardwareInfo:
    name: str
    capability: str  # "9.0"
    sm_count: int
    l2_bytes: int
    shared_mem_per_block: int
    shared_mem_per_block_optin: int
    shared_mem_per_sm: int
    registers_per_block: int
    registers_per_sm: int
    max_threads_per_sm: int
    warp_size: int
    total_memory_bytes: int
    copy_bytes_per_s: float | None  # measured, bytes read + written
    fp32_matmul_flops_per_s: float | None  # measured, TF32 off
    torch_version: str
    cuda_version: str
    driver_version: str
    measured_at: str
    bf16_matmul_flops_per_s: float | None = None  # measured (absent in descriptions cached before it was)

    @property
    def hardware_id(self) -> str:
        return f"{self.name} (sm_{self.capability.replace('.', '')})"

    def as_dict(self) -> dict:
        return asdict(self)


def _driver_version() -> str:
    try:
        from cuda.bindings import driver
        driver.cuInit(0)
        err, v = driver.cuDriverGetVersion()
        if int(err) == 0:
            return f"{v // 1000}.{(v % 1000) // 10}"
    except Exception:  # noqa: BLE001 - optional
        pass
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=20).stdout
            return out.strip().splitlines()[0]
        except (OSError, subprocess.SubprocessError, IndexError):
            pass
    return "unknown"


def _static(device: int) -> dict:
    import torch
    p = torch.cuda.get_device_properties(device)

    def g(attr: str, default: int = 0) -> int:
        return int(getattr(p, attr, default) or default)

    return dict(
        name=p.name, capability=f"{p.major}.{p.minor}", sm_count=p.multi_processor_count,
        l2_bytes=g("L2_cache_size"), shared_mem_per_block=g("shared_memory_per_block", 48 << 10),
        shared_mem_per_block_optin=g("shared_memory_per_block_optin"),
        shared_mem_per_sm=g("shared_memory_per_multiprocessor"),
        registers_per_block=g("regs_per_block", 65536),
        registers_per_sm=g("regs_per_multiprocessor", 65536),
        max_threads_per_sm=g("max_threads_per_multi_processor", 2048), warp_size=g("warp_size", 32),
        total_memory_bytes=int(p.total_memory), torch_version=torch.__version__,
        cuda_version=str(torch.version.cuda), uuid=str(getattr(p, "uuid", "")))


def cache_path(static: Mapping[str, Any]) -> Path:
    from foundry.kernels import cache_dir
    key = hashlib.sha256("\0".join([platform.node(), static["name"], static.get("uuid", ""),
                                    static["torch_version"], static["cuda_version"]]).encode()
                         ).hexdigest()[:16]
    return cache_dir("hardware") / f"{key}.json"


def describe(*, device: int | None = None, measure: bool = True, refresh: bool = False) -> HardwareInfo:
    """This machine's GPU, with measured ceilings (cached per machine unless `refresh`)."""
    import torch
    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA GPU visible: the hardware description needs one")
    dev = torch.cuda.current_device() if device is None else device
    static = _static(dev)
    path = cache_path(static)
    if not refresh and path.exists():
        try:
            data = json.loads(path.read_text())
            if not measure or (data.get("copy_bytes_per_s") and data.get("bf16_matmul_flops_per_s")):
                return HardwareInfo(**data)
        except (ValueError, TypeError):
            pass
    copy_bps = flops = half_flops = None
    if measure:
        copy_bps, flops, half_flops = _measure(dev)
    static.pop("uuid", None)
    info = HardwareInfo(**static, copy_bytes_per_s=copy_bps, fp32_matmul_flops_per_s=flops,
                        bf16_matmul_flops_per_s=half_flops,
                        driver_version=_driver_version(),
                        measured_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(info.as_dict(), indent=1))
    os.replace(tmp, path)
    return info


def _measure(device: int) -> tuple[float, float, float]:
    import torch

    from foundry.evaluate.cuda_timing import tf32_policy
    from foundry.tasks.roofline import measure_ceilings
    try:
        with tf32_policy("off"):  # the fp32 rate the judge's float32 runs at
            c = measure_ceilings(torch.device("cuda", device))
    finally:
        torch.cuda.empty_cache()
    return c.bandwidth_bytes_per_s, c.flops_per_s, c.half_flops_per_s


def ceilings(info: HardwareInfo):
    """The measured ceilings as foundry.tasks.roofline.DeviceCeilings (anchors if unmeasured)."""
    from foundry.tasks.roofline import DeviceCeilings
    if not info.copy_bytes_per_s or not info.fp32_matmul_flops_per_s:
        return DeviceCeilings()
    half = {"half_flops_per_s": info.bf16_matmul_flops_per_s} if info.bf16_matmul_flops_per_s else {}
    return DeviceCeilings(bandwidth_bytes_per_s=info.copy_bytes_per_s,
                          flops_per_s=info.fp32_matmul_flops_per_s, **half,
                          source=f"measured on {info.name} at {info.measured_at}"
                                 + ("" if half else " (bf16 matmul: the anchor)"))


def roofline(task, info: HardwareInfo, *, overrides: Mapping[str, Any] | None = None):
    """The task's floor on this GPU; `.fraction(runtime_ms)` gives a candidate's share."""
    from foundry.tasks.roofline import roofline_for_task
    return roofline_for_task(task, ceilings=ceilings(info), overrides=overrides)


def prompt_facts(info: HardwareInfo) -> dict[str, str]:
    """What a kernel writer should know about the GPU, as labelled lines (a prompt's
    hardware section)."""
    facts = {
        "device": f"{info.name}, compute capability {info.capability} (sm_{info.capability.replace('.', '')}), "
                  f"{info.sm_count} SMs, warp size {info.warp_size}",
        "memory": f"L2 cache {info.l2_bytes / 2**20:.0f} MiB; shared memory {info.shared_mem_per_block // 1024} KiB "
                  f"per block by default, up to {info.shared_mem_per_block_optin // 1024} KiB opt-in, "
                  f"{info.shared_mem_per_sm // 1024} KiB per SM; {info.total_memory_bytes / 2**30:.0f} GiB device memory",
        "registers and threads": f"{info.registers_per_block} registers per block, {info.registers_per_sm} per SM; "
                                 f"up to {info.max_threads_per_sm} threads per SM",
    }
    if info.copy_bytes_per_s and info.fp32_matmul_flops_per_s:
        facts["measured"] = (f"copy bandwidth {info.copy_bytes_per_s / 1e12:.2f} TB/s (read + write), "
                             f"fp32 matmul {info.fp32_matmul_flops_per_s / 1e12:.1f} TFLOP/s (TF32 off)"
                             + (f", bf16 matmul {info.bf16_matmul_flops_per_s / 1e12:.0f} TFLOP/s"
                                if info.bf16_matmul_flops_per_s else ""))
    facts["software"] = f"torch {info.torch_version}, CUDA {info.cuda_version}, driver {info.driver_version}"
    return facts


def cpu_prompt_facts(*, threads: int) -> dict[str, str]:
    """The same for a CPU run: the processor and the threads the judge gives a candidate."""
    import torch
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), model)
    except OSError:
        pass
    return {"device": f"CPU {model}, {threads} thread(s) per candidate ({os.cpu_count()} on the machine)",
            "software": f"torch {torch.__version__}"}


def prompt_text(info: HardwareInfo) -> str:
    """`prompt_facts` as plain lines."""
    return "\n".join(f"{k}: {v}" for k, v in prompt_facts(info).items())


@dataclass(frozen=True)
class NcuReport:
    ok: bool
    metrics: dict  # name -> duration-weighted mean over the candidate's kernels
    kernels: tuple  # profiled kernel names that counted
    note: str
    unavailable: bool = False  # the machine's state (no ncu, no counters, no isolation), not the candidate's


def ncu_binary() -> str | None:
    found = shutil.which("ncu")
    if found:
        return found
    for root in ("/opt/nvidia/nsight-compute", "/usr/local/cuda/bin"):
        for p in sorted(Path(root).glob("**/ncu"), reverse=True) if Path(root).exists() else ():
            if os.access(p, os.X_OK):
                return str(p)
    return None


def parse_ncu_csv(text: str, *, kernel_names: Iterable[str] = ()) -> NcuReport:
    """Aggregate ncu `--csv --page raw` output over the kernels named `kernel_names`
    (a substring match; all kernels when empty), weighting by kernel duration."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    if len(lines) < 3:
        return NcuReport(False, {}, (), "ncu produced no metric rows")
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    header, body = rows[0], rows[2:]  # row 1 holds units
    try:
        kcol = header.index("Kernel Name")
    except ValueError:
        return NcuReport(False, {}, (), "ncu output has no 'Kernel Name' column")
    names = [n for n in kernel_names if n]
    cols = {k: header.index(m) for k, m in NCU_METRICS.items() if m in header}
    if "duration_ns" not in cols:
        return NcuReport(False, {}, (), "ncu output lacks gpu__time_duration.sum")
    acc: dict[str, float] = {}
    weight, used = 0.0, []
    for r in body:
        if len(r) <= max(cols.values()):
            continue
        kname = r[kcol]
        if names and not any(n in kname for n in names):
            continue
        try:
            w = float(r[cols["duration_ns"]].replace(",", ""))
        except ValueError:
            continue
        used.append(kname)
        weight += w
        for k, c in cols.items():
            if k == "duration_ns":
                continue
            try:
                acc[k] = acc.get(k, 0.0) + w * float(r[c].replace(",", ""))
            except ValueError:
                pass
    if not used:
        return NcuReport(False, {}, (), "none of the candidate's kernels were profiled")
    metrics = {k: v / weight for k, v in acc.items()} if weight > 0 else {}
    metrics["duration_ns_total"] = weight
    metrics["kernel_count"] = len(set(used))
    metrics["launches"] = len(used)
    return NcuReport(True, metrics, tuple(sorted(set(used))), f"{len(used)} kernel launches profiled")


def ncu_profile(*, task_path: str, candidate_path: str, params: Mapping | None = None,
                kernel_names: Iterable[str] = (), profile: str = "full",
                timeout_s: float = 300.0, isolated: bool = False) -> NcuReport:
    """Run the candidate under Nsight Compute and return its kernels' metrics. `isolated`
    (a search's candidates): ncu and the candidate run in the judge's isolation where this
    process may enter it (foundry.evaluate.isolation); the CLI profiles a user's own file
    without it."""
    ncu = ncu_binary()
    if ncu is None:
        return NcuReport(False, {}, (), "Nsight Compute (ncu) not found: timing only", unavailable=True)
    kernel_names = tuple(kernel_names)
    names = sorted({n for n in kernel_names if re.fullmatch(r"\w+", n)})
    # only the candidate's own kernels where their names are known (not the input fills and
    # copies around them; matched as parse_ncu_csv matches them), a few launches each, so
    # the replays stay short
    only = ["--kernel-name", "regex:" + "|".join(names), "--launch-count", str(min(64, 2 * len(names)))] \
        if names else ["--launch-count", "200"]
    cmd = [ncu, "--clock-control", "none", "--target-processes", "all", "--csv",
           "--page", "raw", *only,
           "--metrics", ",".join(NCU_METRICS.values()),
           sys.executable, "-m", "foundry.hardware", "ncu-target", task_path, candidate_path,
           json.dumps(dict(params or {})), profile]
    with tempfile.TemporaryDirectory(prefix="foundry-ncu-") as scratch:
        # with `isolated`: the same isolation as the judge's workers (read-only filesystems
        # but this scratch folder, no network, no capabilities) for ncu and what it runs
        env = {**os.environ, "TMPDIR": scratch, "HOME": scratch,
               "TRITON_CACHE_DIR": os.path.join(scratch, "triton")}
        preexec = _isolated_child(scratch) if isolated else None
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env,
                                  preexec_fn=preexec)
        except subprocess.TimeoutExpired:
            return NcuReport(False, {}, (), f"ncu timed out after {timeout_s:.0f} s: timing only")
        except subprocess.SubprocessError as e:  # the isolation could not be entered
            return NcuReport(False, {}, (), f"ncu could not start isolated ({e}): timing only", unavailable=True)
    out = proc.stdout + "\n" + proc.stderr
    if "ERR_NVGPUCTRPERM" in out or "LibraryNotLoaded" in out or "Failed to initialize" in out:
        why = re.search(r"==ERROR==[^\n]*", out)
        return NcuReport(False, {}, (), "ncu cannot read the GPU counters here "
                         f"({why.group(0) if why else 'profiler failed'}): timing only", unavailable=True)
    report = parse_ncu_csv(proc.stdout, kernel_names=kernel_names)
    if not report.ok and proc.returncode != 0:
        tail = out.strip().splitlines()[-3:]
        return NcuReport(False, {}, (), f"ncu failed (exit {proc.returncode}): {' | '.join(tail)}")
    return report


def _isolated_child(scratch: str):
    """A preexec function entering the judge's isolation (nothing where it is not available)."""
    from foundry.evaluate import isolation
    if not isolation.available():
        return None

    def enter() -> None:
        os.setsid()
        isolation.isolate([scratch])
    return enter


def hardware_diagnosis(*, ncu: Mapping | None = None, roofline: Mapping | None = None,
                       kernels: Mapping | None = None) -> str:
    """One line on what bounds a kernel, from what was measured: the roofline position
    (metrics["roofline"]), Nsight Compute counters (`ncu_*`, without the prefix) and the
    device profiler's kernels (metrics["kernels"]). E.g. "memory-bound at 41% of the
    floor; DRAM 38% of peak, SM 12%, occupancy 61%, L2 hit 30%; 3 kernels where one
    would do"."""
    parts = []
    if roofline and roofline.get("bound") and isinstance(roofline.get("fraction"), (int, float)):
        parts.append(f"{roofline['bound']}-bound at {100 * float(roofline['fraction']):.0f}% of the floor")
    ncu = dict(ncu or {})
    counters = [(label, ncu.get(key)) for label, key in (("DRAM", "dram_throughput_pct"),
                                                         ("SM", "sm_throughput_pct"),
                                                         ("occupancy", "achieved_occupancy_pct"),
                                                         ("L2 hit", "l2_hit_rate_pct"))]
    shown = [f"{label} {float(v):.0f}%" for label, v in counters if isinstance(v, (int, float))]
    if shown:
        shown[0] = shown[0] + " of peak" if shown[0].startswith(("DRAM", "SM")) else shown[0]
        parts.append(", ".join(shown))
    if isinstance(ncu.get("registers_per_thread"), (int, float)):
        smem = sum(float(ncu.get(k) or 0) for k in ("shared_mem_static_bytes", "shared_mem_dynamic_bytes"))
        parts.append(f"{float(ncu['registers_per_thread']):.0f} registers per thread, "
                     f"{smem / 1024:.0f} KiB shared memory per block")
    count = ncu.get("kernel_count")
    if count is None and kernels:
        times = [t for t in kernels.get("kernel_times_us") or () if isinstance(t, (list, tuple)) and len(t) == 3]
        count = len(times) or kernels.get("own_kernels")
    if isinstance(count, (int, float)) and count > 1:
        parts.append(f"{int(count)} kernels where one would do" if parts and parts[0].startswith("memory")
                     else f"{int(count)} kernels")
    return "; ".join(parts)


def kernel_times(kernels: Mapping | None) -> list:
    """The well-formed [name, device microseconds, launches] rows of a profile's
    "kernel_times_us" (CudaDevice.kernel_summary / profiled_call), in their order."""
    return [t for t in (kernels or {}).get("kernel_times_us") or () if isinstance(t, (list, tuple)) and len(t) == 3]


def baseline_line(kernels: Mapping | None, *, fraction: float | None = None) -> str:
    """One line on a baseline (eager or torch.compile) from its profiled forward
    (Baseline.eager_kernels / compile_kernels) and its fraction of the roofline floor, e.g.
    "41% of the floor; 5 launches of 3 kernels, the slowest softmax_kernel (812 us)"."""
    parts = [f"{100 * fraction:.0f}% of the floor"] if isinstance(fraction, (int, float)) else []
    times = kernel_times(kernels)
    if times:
        slowest = max(times, key=lambda t: float(t[1]))
        launches = int((kernels or {}).get("launches") or sum(int(t[2]) for t in times))
        count = int((kernels or {}).get("kernels") or len(times))
        parts.append(f"{launches} launch{'es' if launches != 1 else ''} of {count} kernel{'s' if count != 1 else ''}, "
                     f"the slowest {slowest[0][:60]} ({float(slowest[1]):.0f} us)")
    return "; ".join(parts)


def _ncu_target(task_path: str, candidate_path: str, params_json: str, profile: str) -> int:
    """Run a candidate's forward a few times on the GPU (the process ncu profiles)."""
    import torch

    from foundry.tasks.loader import build_module, load_task
    task = load_task(task_path, profile=profile)
    module = build_module(task)
    glb: dict[str, Any] = {"__name__": "foundry_ncu_candidate", "__file__": candidate_path}
    exec(compile(Path(candidate_path).read_text(), candidate_path, "exec"), glb)  # noqa: S102
    params = json.loads(params_json)
    if params:
        glb["PARAMS"] = {**glb.get("PARAMS", {}), **params}
    torch.manual_seed(0)
    model = glb["ModelNew"](*module.get_init_inputs()).cuda()
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]
    with torch.no_grad():
        for _ in range(2):
            model(*inputs)
    torch.cuda.synchronize()
    return 0


def candidate_report(*, task, candidate_path: str, source: str, backend: str,
                     runtime_ms: float | None, ncu: bool = False,
                     params: Mapping | None = None) -> dict:
    """Hardware-aware extras for one judged candidate: the roofline floor and the
    candidate's fraction of it, and (with `ncu`) Nsight Compute metrics of its own
    kernels, or a note saying why there are none. Runs the candidate outside the sandbox
    when `ncu` is set: for a user's own files (the CLI), not for a search."""
    out: dict = {}
    try:
        info = describe()
        out["hardware"] = info.hardware_id
        roof = roofline(task, info)
        out.update(roofline_floor_ms=roof.floor_ms, roofline_bound=roof.bound,
                   roofline_fraction=roof.fraction(runtime_ms))
    except Exception as e:  # noqa: BLE001 - extras never fail an evaluation
        out["roofline_note"] = f"no roofline: {type(e).__name__}: {e}"[:300]
    if ncu:
        from foundry.evaluate.cuda_device import kernel_names_in_source
        rep = ncu_profile(task_path=task.path, candidate_path=candidate_path, params=params,
                          kernel_names=kernel_names_in_source(source, backend),
                          profile=task.size_profile)
        out["ncu_ok"] = rep.ok
        out["ncu_note"] = rep.note
        out.update({f"ncu_{k}": v for k, v in rep.metrics.items()})
    return out


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["ncu-target"] and len(argv) == 5:
        return _ncu_target(*argv[1:])
    if argv[:1] in (["describe"], []):
        info = describe(refresh="--refresh" in argv)
        print(prompt_text(info))
        print(json.dumps(info.as_dict(), indent=1))
        return 0
    print("usage: python -m foundry.hardware [describe [--refresh] | ncu-target TASK CANDIDATE PARAMS PROFILE]",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
