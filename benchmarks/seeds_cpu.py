"""Compiler seeds on the CPU: per task of the suite, write its seed (Inductor's C++ kernels
and wrapper as a `c` candidate, foundry.seeds) and judge it with the real judge
(foundry.evaluate, small sizes): correct or not, guard flags, and the judge's speedups
against eager and against torch.compile; then how many tasks got a correct seed and the
geometric means of those speedups.

    python benchmarks/seeds_cpu.py [--level 1 2] [--only SUBSTR] [--threads 1] [--trials 5]
                                   [--out-dir DIR] [--json FILE]

The judge times both baselines in its own workers (cached per task; --fresh-baselines
uses a new cache so that they are measured in this run). Tasks that get no seed are
listed with the reason.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path


def _args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--level", type=int, nargs="*", default=[1, 2])
    ap.add_argument("--only", default="", help="only tasks whose id contains this")
    ap.add_argument("--threads", type=int, default=1, help="judge threads (seeds are generated for the same)")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--out-dir", default=None, help="write each seed here as <task>.py")
    ap.add_argument("--json", default=None, help="write the per-task rows here")
    ap.add_argument("--fresh-baselines", action="store_true", help="measure the baselines again in this run")
    return ap.parse_args()


def _geomean(xs):
    return math.exp(statistics.fmean(math.log(x) for x in xs)) if xs else float("nan")


def main() -> int:
    a = _args()
    import torch
    from foundry.evaluate import EvalConfig, Evaluator
    from foundry.seeds import inductor_seed
    from foundry.tasks.suite import load_suite
    from foundry.types import Candidate

    settings = {"device": "cpu", "trials": a.trials, "threads": a.threads, "compile_baseline": True}
    if a.fresh_baselines:
        settings["baseline_cache_dir"] = tempfile.mkdtemp(prefix="seed-baselines-")
    out_dir = Path(a.out_dir) if a.out_dir else None
    if out_dir:
        out_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    with Evaluator(config=EvalConfig.from_config(settings)) as ev:
        for task in load_suite(level=a.level, profile="small"):
            if a.only not in task.task_id:
                continue
            t0 = time.monotonic()
            seed = inductor_seed(task, device="cpu", threads=a.threads)
            gen_s = time.monotonic() - t0
            row = {"task": task.task_id, "seed": seed.ok, "kernels": seed.kernels, "generate_s": round(gen_s, 1)}
            if not seed.ok:
                row["note"] = seed.note
                rows.append(row)
                print(f"{task.task_id:42s} {seed.note[:150]}", flush=True)
                continue
            if out_dir:
                (out_dir / (task.task_id.replace("/", "__") + ".py")).write_text(seed.source)
            cand = Candidate.make(task_id=task.task_id, source=seed.source, backend=seed.backend, origin="seed")
            r = ev.evaluate(task=task, candidate=cand)
            row.update(correct=r.correct, stage=r.stage, flags=list(r.flags), runtime_ms=r.runtime_ms,
                       eager_ms=r.eager_ms, compile_ms=r.compile_ms, speedup_eager=r.speedup_eager,
                       speedup_compile=r.speedup_compile, error=r.error[:300])
            rows.append(row)
            se = f"{r.speedup_eager:.2f}x" if r.speedup_eager else "-"
            sc = f"{r.speedup_compile:.2f}x" if r.speedup_compile else "-"
            print(f"{task.task_id:42s} correct={r.correct} kernels={seed.kernels} vs eager {se:>6s} "
                  f"vs compile {sc:>6s} flags={list(r.flags)} {'' if r.correct else r.error[:120]!r}", flush=True)
    ok = [r for r in rows if r.get("correct")]
    seeded = [r for r in rows if r["seed"]]
    print(f"\n{len(rows)} tasks: {len(seeded)} got a seed, {len(ok)} correct; geometric-mean speedup of the "
          f"correct ones vs eager {_geomean([r['speedup_eager'] for r in ok if r['speedup_eager']]):.3f}x, "
          f"vs torch.compile {_geomean([r['speedup_compile'] for r in ok if r['speedup_compile']]):.3f}x "
          f"(threads={a.threads}, torch {torch.__version__})")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
