"""Template engine on the CPU: per task of the suite, the `c` template candidate's
speedup over eager PyTorch (small sizes), and the geometric mean over covered tasks.

    python benchmarks/templates_cpu.py [--level 1 2] [--threads 1] [--tune] [--only SUBSTR]

Each covered task: recognise, emit the `c` candidate, check it against the reference on
the same inputs, then time eager and the candidate in the same process (interleaved
rounds, median of per-round means, fixed thread count). With --tune the tuner searches
the candidate's TUNABLE space first (timings by the same in-process measurement).
Uncovered tasks are listed with the reason ("no template applies; needs an LLM").
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys


def _args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--level", type=int, nargs="*", default=None)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--tune", action="store_true")
    ap.add_argument("--budget", type=int, default=8, help="tuner evaluations per task")
    ap.add_argument("--only", default="", help="only tasks whose id contains this")
    ap.add_argument("--rounds", type=int, default=7)
    return ap.parse_args()


def main() -> int:
    a = _args()
    os.environ.setdefault("OMP_NUM_THREADS", str(a.threads))
    import torch
    torch.set_num_threads(a.threads)
    from foundry.tasks.suite import load_suite
    from foundry.templates.engine import coverage, emit, variants
    from foundry.tuning.inprocess import InProcessMeasure
    from foundry.tuning.tuner import Tuner, TunerConfig
    from foundry.types import Candidate

    tasks = [t for t in load_suite(level=a.level, profile="small") if a.only in t.task_id]
    rows, skipped = [], []
    for task in tasks:
        why = coverage(task)
        if why:
            skipped.append((task.task_id, why))
            continue
        try:
            applicable = variants(task, "c")
            if not applicable:
                skipped.append((task.task_id, "no c template applies"))
                continue
            src = emit(task, backend="c", variant=applicable[0])  # the one expected fastest, as the search's first
            cand = Candidate.make(task_id=task.task_id, source=src, backend="c", origin="template")
            measure = InProcessMeasure(task=task, rounds=a.rounds)
            if a.tune:
                tuned = Tuner(config=TunerConfig(budget=a.budget, seed=0)).tune(
                    task=task, candidate=cand, measure=measure, device="cpu")
                cand = tuned.candidate
            res = measure(cand)
        except Exception as e:  # noqa: BLE001 - report and go on
            rows.append((task.task_id, None, None, None, f"{type(e).__name__}: {str(e)[:120]}"))
            continue
        if not res.correct:
            rows.append((task.task_id, None, None, None, res.error[:120]))
            continue
        rows.append((task.task_id, res.eager_ms, res.runtime_ms, res.speedup_eager, json_params(cand.params)))
        print(f"{task.task_id:42s} eager {res.eager_ms:8.3f} ms  template {res.runtime_ms:8.3f} ms  "
              f"speedup {res.speedup_eager:5.2f}x  {json_params(cand.params)}", flush=True)
    ok = [r for r in rows if r[3]]
    print()
    for tid, *_, err in [r for r in rows if not r[3]]:
        print(f"{tid:42s} FAILED: {err}")
    for tid, why in skipped:
        print(f"{tid:42s} {why}")
    if ok:
        g = math.exp(statistics.fmean(math.log(r[3]) for r in ok))
        print(f"\ncovered {len(ok) + len([r for r in rows if not r[3]])}/{len(tasks)} tasks, correct {len(ok)}; "
              f"geometric-mean speedup over eager: {g:.3f}x  (threads={a.threads}, torch {torch.__version__})")
    return 0


def json_params(p: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(p.items()))


if __name__ == "__main__":
    sys.exit(main())
