"""End-to-end GPU evaluation throughput (run on a GPU machine): candidates per minute
judged by foundry.evaluate.Evaluator (build, correctness trials, guards, timing) on
level-1 tasks with the cuda and triton backends, one warm worker, baselines cached.

The baselines of each task are timed first (they are cached per task, shapes, GPU and
torch version, as in a real run); then each candidate (every task x backend x tuning
value, all distinct sources/params) is evaluated once, in sequence, and the wall time
of that loop gives candidates per minute. Target: >= 30 per minute.

Sizes: --sizes kernelbench (default) uses KernelBench's own level-1 sizes for these ops
(batch 16, dim 16384); --sizes full / small use the suite's profiles.

Usage: python benchmarks/gpu_throughput.py [--sizes kernelbench|full|small] [--trials 3]
       [--max-seconds S] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def main() -> int:
    import gpu_candidates as gc

    from foundry.evaluate.config import EvalConfig
    from foundry.evaluate.evaluator import Evaluator
    from foundry.tasks.loader import load_task
    from foundry.types import Candidate

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="kernelbench", choices=("kernelbench", "full", "small"))
    ap.add_argument("--max-seconds", type=float, default=0.0,
                    help="stop starting new candidates after this long (0: no limit)")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--limit", type=int, default=0, help="evaluate at most this many candidates")
    ap.add_argument("--compile-baseline", action="store_true")
    ap.add_argument("--json", default="")
    args = ap.parse_args()

    stems = sorted(gc.ELEMENTWISE)
    jobs = []
    for stem in stems:
        for backend in ("cuda", "triton"):
            src = gc.candidate(stem, backend)
            values = [256, 512] if backend == "cuda" else [1024, 2048]
            for v in values:
                jobs.append((stem, backend, src, {"BLOCK": v}))
    if args.limit:
        jobs = jobs[:args.limit]
    import os
    cfg = EvalConfig.from_config({"device": "cuda", "trials": args.trials, "timeout_s": 240.0,
                                  "compile_baseline": args.compile_baseline, "memory_mb": 16384,
                                  "isolation": os.environ.get("FOUNDRY_GPU_ISOLATION", "auto")})
    import dataclasses
    profile = "small" if args.sizes == "small" else "full"
    tasks = {s: load_task(gc.task_path(s), profile=profile) for s in stems}
    if args.sizes == "kernelbench":
        tasks = {s: dataclasses.replace(t, size_overrides={"BATCH": 16, "DIM": 16384})
                 for s, t in tasks.items()}
    report: dict = {"sizes": args.sizes, "trials": args.trials, "candidates_planned": len(jobs)}
    with Evaluator(config=cfg) as ev:
        t0 = time.perf_counter()
        for s in stems:
            ev.baselines(task=tasks[s])
        report["baselines_s"] = time.perf_counter() - t0
        warm = Candidate.make(task_id=tasks[stems[0]].task_id, source=gc.candidate(stems[0], "cuda"),
                              backend="cuda", params={"BLOCK": 128})
        t0 = time.perf_counter()
        first = ev.evaluate(task=tasks[stems[0]], candidate=warm)
        report["warmup_eval_s"] = time.perf_counter() - t0
        report["warmup_correct"] = first.correct
        rows = []
        t0 = time.perf_counter()
        for stem, backend, src, params in jobs:
            if args.max_seconds and time.perf_counter() - t0 > args.max_seconds:
                break
            task = tasks[stem]
            cand = Candidate.make(task_id=task.task_id, source=src, backend=backend, params=params)
            r = ev.evaluate(task=task, candidate=cand)
            rows.append({"task": stem, "backend": backend, "params": params, "correct": r.correct,
                         "stage": int(r.stage), "eval_s": r.eval_s, "compile_s": r.compile_s,
                         "runtime_ms": r.runtime_ms, "speedup_eager": r.speedup_eager,
                         "error": (r.error or "")[-300:]})
            print(json.dumps(rows[-1]), flush=True)
        wall = time.perf_counter() - t0
    report["wall_s"] = wall
    report["candidates"] = len(rows)
    report["per_minute"] = len(rows) * 60.0 / wall
    report["correct"] = sum(r["correct"] for r in rows)
    report["eval_s_median"] = statistics.median(r["eval_s"] for r in rows)
    report["rows"] = rows
    report["target_ge_30_per_minute"] = report["per_minute"] >= 30
    print(json.dumps({k: v for k, v in report.items() if k != "rows"}, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
