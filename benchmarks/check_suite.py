"""Time the suite's reference forwards at a size profile and run the degeneracy check.

    python benchmarks/check_suite.py                 # the project's suite, small sizes, CPU
    python benchmarks/check_suite.py --profile full --device cuda --no-degeneracy

Prints one row per task (forward ms, output shape, degeneracy verdict) and the totals;
exits 1 if any task is degenerate or fails to run.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.append(str(Path(__file__).resolve().parents[1]))  # foundry from a source tree, if not installed

from foundry.tasks.degeneracy import check_task  # noqa: E402
from foundry.tasks.loader import build_module  # noqa: E402
from foundry.tasks.suite import load_suite  # noqa: E402
from foundry.types import Task  # noqa: E402


def time_reference(task: Task, device: str) -> tuple[float, str]:
    """Seconds for one forward (after one untimed warm-up call) and the output's shape."""
    module = build_module(task)
    torch.manual_seed(0)
    model = module.Model(*module.get_init_inputs()).to(device)
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]
    with torch.no_grad():
        model(*inputs)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = model(*inputs)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        seconds = time.perf_counter() - t0
    shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
    return seconds, str(shape)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--path", help="suite / KernelBench checkout / task folder (default: the project's suite)")
    ap.add_argument("--level", type=int)
    ap.add_argument("--profile", default="small", choices=("small", "full", "auto"))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--trials", type=int, default=3, help="input sets for the degeneracy check")
    ap.add_argument("--no-degeneracy", action="store_true")
    args = ap.parse_args(argv)
    tasks = load_suite(path=args.path, level=args.level, profile=args.profile)
    print("| task | forward ms | output | degenerate | check ms | reason |\n|" + " --- |" * 6, flush=True)
    total_fwd = total_check = 0.0
    bad = 0
    t_start = time.perf_counter()
    for task in tasks:
        try:
            fwd_s, shape = time_reference(task, args.device)
        except Exception as e:  # noqa: BLE001 - reported per task
            bad += 1
            print(f"| {task.task_id} | - | - | - | - | forward failed: {type(e).__name__}: {e} |", flush=True)
            continue
        total_fwd += fwd_s
        verdict, check_ms, reason = "-", 0.0, ""
        if not args.no_degeneracy:
            t0 = time.perf_counter()
            report = check_task(task, trials=args.trials, device=args.device)
            check_ms = (time.perf_counter() - t0) * 1e3
            total_check += check_ms / 1e3
            verdict, reason = ("yes" if report.degenerate else "no"), report.reason
            bad += report.degenerate
        print(f"| {task.task_id} | {fwd_s * 1e3:.2f} | {shape} | {verdict} | {check_ms:.0f} | {reason} |", flush=True)
    levels = sorted({t.level for t in tasks})
    counts = ", ".join(f"level {lv}: {sum(t.level == lv for t in tasks)}" for lv in levels)
    print(f"\n{len(tasks)} tasks ({counts}); reference forwards {total_fwd:.2f} s in total; "
          f"degeneracy checks {total_check:.2f} s; wall {time.perf_counter() - t_start:.1f} s; "
          f"{bad} degenerate or failing; torch {torch.__version__}, {torch.get_num_threads()} threads")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
