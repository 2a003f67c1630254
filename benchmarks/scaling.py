"""Candidates per minute with 1 GPU and with 2 GPUs: same tasks, same budget, one
invocation (a warm-up run first fills the baseline cache, so neither measured run pays
for torch.compile baselines).

    python benchmarks/scaling.py                      # on a machine with 2 GPUs
    python benchmarks/scaling.py --evaluations 300 --out scaling.json
    python benchmarks/scaling.py --standin            # dry run without GPUs: 2 logical
                                                      # GPUs, stand-in evaluator of fixed cost

Each measured run is the real command (`python -m foundry`, llm=none: the template
engine, the real evaluator) with `ray.max_gpu_evaluators=1` or `2`. The rate is the
steady state (the middle 80% of the run's evaluations, by their log timestamps).
Target: 2 GPUs give at least 1.8 times the candidates per minute of 1.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def one_run(*, run_dir: Path, gpus: int, evaluations: int, args) -> dict:
    from foundry.store import read_evaluations
    select = [f"tasks.ids=[{args.ids}]"] if args.ids else [f"tasks.limit={args.tasks}"]
    cmd = [sys.executable, "-m", "foundry", f"tasks.level={args.level}", *select,
           f"budget.evaluations={evaluations}", f"budget.wall_time_s={args.wall_s}",
           f"island.count={args.islands}", f"run.in_flight_per_island={args.in_flight}",
           f"ray.max_gpu_evaluators={gpus}", "run.progress=log", "run.progress_every_s=30",
           f"hydra.run.dir={run_dir}"]
    cmd += list(args.override)
    if args.standin:
        cmd += ["ray.num_gpus=2", "run.evaluator_impl=actors.standins:fixed_cost_evaluator",
                f"+evaluator.cost_s={args.standin_cost_s}",
                "run.proposer_impl=actors.standins:copy_kernel_proposer"]
    t0 = time.time()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"run with {gpus} GPU(s) failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    records = read_evaluations(run_dir)
    meta = json.loads((run_dir / "run.json").read_text())
    times = sorted(r.recorded_at for r in records)
    n = len(times)
    lo, hi = times[n // 10], times[(9 * n) // 10]
    per_min = 60 * 0.8 * n / (hi - lo) if n >= 10 and hi > lo else float("nan")
    return {"gpus": gpus, "gpus_seen": meta.get("gpus"), "evaluations": n,
            "candidates_per_min": per_min, "wall_s": time.time() - t0,
            "correct": sum(r.result.correct for r in records),
            "hardware": sorted({r.result.hardware for r in records if r.result.hardware}),
            "stop_reason": meta.get("stop_reason")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--evaluations", type=int, default=240, help="budget of each measured run")
    ap.add_argument("--level", type=int, default=1)
    ap.add_argument("--tasks", type=int, default=12, help="first N tasks of the level")
    ap.add_argument("--ids", default="8,9,10,11,12,13,14,15",
                    help="comma-separated task ids of the level (default: tasks the template engine "
                         "covers; an empty string takes the first --tasks tasks)")
    ap.add_argument("--override", action="append", default=[],
                    help="extra Hydra override for every run (repeatable), e.g. run.tune=false")
    ap.add_argument("--islands", type=int, default=4)
    ap.add_argument("--in-flight", type=int, default=4, help="candidates in flight per island")
    ap.add_argument("--wall-s", type=float, default=540)
    ap.add_argument("--standin", action="store_true", help="no GPU needed: logical GPUs, stand-in parts")
    ap.add_argument("--standin-cost-s", type=float, default=0.05)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="scaling-") as tmp:
        warm = one_run(run_dir=Path(tmp) / "warmup", gpus=2, evaluations=2 * (len(args.ids.split(",")) if args.ids else args.tasks), args=args)
        one = one_run(run_dir=Path(tmp) / "gpu1", gpus=1, evaluations=args.evaluations, args=args)
        two = one_run(run_dir=Path(tmp) / "gpu2", gpus=2, evaluations=args.evaluations, args=args)
    ratio = two["candidates_per_min"] / one["candidates_per_min"]
    if not (one["correct"] and two["correct"]):
        print("warning: a run found no correct candidate; its rate measures failures, not evaluations",
              file=sys.stderr)
    for r in (one, two):
        print(f"{r['gpus']} GPU(s): {r['candidates_per_min']:.1f} candidates/min "
              f"({r['evaluations']} evaluations, {r['correct']} correct, {r['wall_s']:.0f} s, "
              f"stopped: {r['stop_reason']})")
    print(f"ratio 2 GPUs / 1 GPU: {ratio:.2f} (target >= 1.8); warm-up {warm['wall_s']:.0f} s")
    if args.out:
        args.out.write_text(json.dumps({"one_gpu": one, "two_gpus": two, "ratio": ratio,
                                        "warmup": warm, "args": vars(args) | {"out": str(args.out)}},
                                       indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
