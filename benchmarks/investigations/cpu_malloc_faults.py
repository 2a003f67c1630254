"""Page faults in CPU timings: a task's eager module and a candidate timed by the judge's
CPU protocol (`foundry.evaluate.cpu_timing.time_forward`, the judge's default timing
settings, one thread) in a fresh process under glibc's default malloc and under the CPU
workers' settings (`foundry.evaluate.worker_env.CPU_MALLOC_POLICY`), rounds alternating the
two. Per timing: the median ms per call of its blocks and the minor page faults per call.

    python benchmarks/investigations/cpu_malloc_faults.py TASK_FILE [CANDIDATE_FILE] [--rounds 4] [--repeats 3]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from foundry.evaluate.worker_env import CPU_MALLOC_POLICY  # noqa: E402

MALLOC_VARIABLES = ("GLIBC_TUNABLES", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")


def time_in_this_process(task_file: str, candidate_file: str, repeats: int) -> list[dict]:
    import resource

    import torch

    from foundry.evaluate.config import EvalConfig
    from foundry.evaluate.cpu_timing import time_forward
    from foundry.tasks.loader import build_module, load_task

    torch.set_num_threads(1)
    module = build_module(load_task(task_file, profile="small"))
    torch.manual_seed(0)
    models = {"eager": module.Model(*module.get_init_inputs())}
    if candidate_file:
        spec = importlib.util.spec_from_file_location("candidate", candidate_file)
        candidate = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(candidate)
        models["candidate"] = candidate.ModelNew(*module.get_init_inputs())
        models["candidate"].load_state_dict(models["eager"].state_dict())
    input_sets = [list(module.get_inputs()) for _ in range(3)]
    config = EvalConfig(device="cpu")
    params = {"warmup_ms": config.warmup_ms, "block_ms": config.timing_block_ms, "min_ms": config.timing_min_ms,
              "min_calls": config.timing_min_calls, "max_calls": config.timing_max_calls}
    rows = []
    with torch.no_grad():
        for _ in range(repeats):
            for name, model in models.items():
                faults_before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                timing = time_forward(lambda inputs: model(*inputs), input_sets,
                                      clock=time.perf_counter_ns, params=params)
                faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults_before
                calls = timing["warmup_calls"] + timing["calls_per_block"] * len(timing["block_ns"])
                per_call = sorted(ns / timing["calls_per_block"] / 1e6 for ns in timing["block_ns"])
                rows.append({"which": name, "ms": round(per_call[len(per_call) // 2], 3),
                             "faults_per_call": round(faults / calls)})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("task_file")
    ap.add_argument("candidate_file", nargs="?", default="")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3, help="timings of each module per process")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(time_in_this_process(a.task_file, a.candidate_file, a.repeats)))
        return 0
    base = {k: v for k, v in os.environ.items() if k not in MALLOC_VARIABLES}
    base["OMP_NUM_THREADS"] = "1"
    settings = {"glibc default": base, "workers' settings": {**base, **CPU_MALLOC_POLICY}}
    for round_number in range(1, a.rounds + 1):
        for label, env in settings.items():
            out = subprocess.run([sys.executable, __file__, a.task_file, a.candidate_file, "--child",
                                  "--repeats", str(a.repeats)], env=env, capture_output=True, text=True)
            if out.returncode != 0:
                raise SystemExit(f"{label}: the timing process failed:\n{out.stderr[-2000:]}")
            rows = json.loads(out.stdout.strip().splitlines()[-1])
            cells = ", ".join(f"{r['which']} {r['ms']} ms/{r['faults_per_call']}" for r in rows)
            print(f"round {round_number}, {label}: {cells}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
