"""How fast the runtime moves candidates when evaluation itself is not the limit.

Runs the real command (`python -m foundry`) with the stand-in evaluator of fixed cost
and the stand-in proposer (actors/standins.py), so every candidate travels the real
path: island actor -> dispatcher actor -> evaluator actor -> island -> driver -> Parquet
log. Prints candidates dispatched per second (steady state, from the log's timestamps),
the driver's and the island actors' peak memory, and writes JSON.

    python benchmarks/dispatch_bench.py [--evaluations 3000] [--cost-s 0.002] [--out FILE]

Targets: >= 200 candidates/s; driver < 1 GB; an island actor < 300 MB.
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--evaluations", type=int, default=3000)
    ap.add_argument("--cost-s", type=float, default=0.002, help="stand-in evaluation cost (sleep)")
    ap.add_argument("--evaluators", type=int, default=8)
    ap.add_argument("--islands", type=int, default=4)
    ap.add_argument("--in-flight", type=int, default=16, help="candidates in flight per island")
    ap.add_argument("--tasks", default="benchmarks/suite", help="task path (level 1 is used)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    from foundry.store import read_evaluations

    with tempfile.TemporaryDirectory(prefix="dispatch-bench-") as tmp:
        run_dir = Path(tmp) / "run"
        cmd = [sys.executable, "-m", "foundry", f"tasks.path={args.tasks}", "tasks.level=1",
               "tasks.limit=4", "tasks.profile=small",
               "run.evaluator_impl=actors.standins:fixed_cost_evaluator",
               "run.proposer_impl=actors.standins:copy_kernel_proposer",
               f"+evaluator.cost_s={args.cost_s}", f"budget.evaluations={args.evaluations}",
               "budget.wall_time_s=300", f"island.count={args.islands}",
               f"ray.cpu_evaluators={args.evaluators}", "ray.evaluator_cpus=0",
               f"run.in_flight_per_island={args.in_flight}", "run.max_duplicates=100000",
               "run.progress=off", f"hydra.run.dir={run_dir}"]
        t0 = time.time()
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        wall = time.time() - t0
        if proc.returncode != 0:
            print(proc.stdout[-3000:], proc.stderr[-3000:], file=sys.stderr)
            return 1
        records = read_evaluations(run_dir)
        meta = json.loads((run_dir / "run.json").read_text())
    times = sorted(r.recorded_at for r in records)
    n = len(times)
    lo, hi = times[n // 10], times[(9 * n) // 10]  # steady state: the middle 80%
    rate = (0.8 * n) / (hi - lo) if hi > lo else float("nan")
    mem = meta["sessions"][-1].get("peak_rss_mb", {})
    islands = {k: v for k, v in mem.items() if k.startswith("island-")}
    result = {
        "evaluations": n, "candidates_per_s_steady": rate, "wall_s_including_startup": wall,
        "evaluation_cost_s": args.cost_s, "evaluators": args.evaluators, "islands": args.islands,
        "in_flight_per_island": args.in_flight, "driver_peak_rss_mb": mem.get("driver"),
        "island_actor_peak_rss_mb": max(islands.values()) if islands else None,
        "stop_reason": meta.get("stop_reason"),
    }
    print(f"evaluations recorded:            {n}")
    print(f"candidates dispatched per second: {rate:.0f} (steady state; target >= 200)")
    print(f"driver peak memory:              {result['driver_peak_rss_mb']:.0f} MB (target < 1024)")
    print(f"island actor peak memory:        {result['island_actor_peak_rss_mb']:.0f} MB (target < 300)")
    print(f"wall time incl. Ray start:       {wall:.1f} s")
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
