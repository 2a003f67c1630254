"""One judge, several KernelBench tasks at their published sizes: where each evaluation's
time goes, what a task's first-time setup costs, what screening a TUNABLE space costs
against one plain evaluation, and the judge's peak host memory.

    python benchmarks/judge_phases.py --path ../shared/kernelbench --tasks 1/24 1/40 2/12 \
        [--evaluations 4] [--screen-points 6] [--device cuda] [--no-compile-baseline] [--out phases.json]

Candidates are the template engine's (Triton on a GPU, `c` on a CPU). Every figure is
the judge's own (`EvalResult.eval_s`, `metrics["phases"]`); the first evaluation of a
task carries its setup (task sizing, degeneracy, baselines eager and torch.compile).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _load(path: str, spec: str):
    from foundry.tasks.suite import SuiteConfig
    level, number = (int(v) for v in spec.split("/"))
    tasks = SuiteConfig.from_config({"path": path, "level": level, "ids": [number]}).load(device=None)
    if not tasks:
        raise SystemExit(f"no task {spec} under {path}")
    return tasks[0]


def _top(phases: dict, n: int = 6) -> str:
    return ", ".join(f"{k} {v:.2f}" for k, v in sorted(phases.items(), key=lambda kv: -kv[1])[:n])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--path", default=str(ROOT.parent / "shared" / "kernelbench"))
    ap.add_argument("--tasks", nargs="+", default=["1/24", "1/40", "2/12"], help="level/number")
    ap.add_argument("--evaluations", type=int, default=4)
    ap.add_argument("--screen-points", type=int, default=6)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--no-compile-baseline", action="store_true",
                    help="time only the eager baseline (the first evaluation's setup leaves torch.compile out)")
    ap.add_argument("--out", default="")
    a = ap.parse_args()

    from foundry.evaluate import EvalConfig, Evaluator
    from foundry.templates.engine import coverage, emit
    from foundry.tuning.space import points, read_tunable
    from foundry.types import Candidate

    backend = "triton" if a.device == "cuda" else "c"
    rows = []
    t_start = time.monotonic()
    ev = Evaluator(config=EvalConfig.from_config({"device": a.device, "compile_baseline": not a.no_compile_baseline}))
    try:
        for spec in a.tasks:
            task = _load(a.path, spec)
            why = coverage(task)
            if why:
                print(f"{task.task_id}: skipped, {why}", flush=True)
                continue
            source = emit(task, backend=backend)
            cand = Candidate.make(task_id=task.task_id, source=source, backend=backend)
            evals = []
            for k in range(a.evaluations):
                r = ev.evaluate(task=task, candidate=cand)
                evals.append(r)
                print(f"{task.task_id} #{k}: correct={r.correct} {r.eval_s:.2f} s "
                      f"runtime={r.runtime_ms} ms eager={r.eager_ms} compile={r.compile_ms} "
                      f"[{_top(r.metrics.get('phases', {}))}] trials: {r.metrics.get('trial_parts_s')} "
                      f"setup: {r.metrics.get('task_setup_parts_s', '-')} "
                      f"{r.error[:300] if not r.correct else ''}",
                      flush=True)
            settings = list(points(read_tunable(source), limit=a.screen_points, exhaustive_max=32, seed=0,
                                   start={}))[:a.screen_points]
            t0 = time.monotonic()
            screened = ev.screen(task=task, candidate=cand, points=settings) if len(settings) > 1 else ()
            screen_s = time.monotonic() - t0
            warm = [r.eval_s for r in evals[1:]] or [evals[0].eval_s]
            row = {"task": task.task_id, "first_eval_s": evals[0].eval_s, "warm_eval_s_median": statistics.median(warm),
                   "correct": sum(r.correct for r in evals), "evaluations": len(evals),
                   "runtime_ms": evals[-1].runtime_ms, "eager_ms": evals[-1].eager_ms,
                   "compile_ms": evals[-1].compile_ms,
                   "first_phases": evals[0].metrics.get("phases", {}),
                   "warm_phases": evals[-1].metrics.get("phases", {}),
                   "warm_trial_parts_s": evals[-1].metrics.get("trial_parts_s", {}),
                   "task_setup_parts_s": evals[0].metrics.get("task_setup_parts_s", {}),
                   "worker_peak_rss_mb": max(r.metrics.get("worker_peak_rss_mb", 0) for r in evals),
                   "screen_points": len(screened), "screen_ok": sum(p.ok for p in screened), "screen_s": screen_s,
                   "screen_point_seconds": [p.seconds for p in screened],
                   "tuned_cost_over_plain": (screen_s + statistics.median(warm)) / statistics.median(warm)}
            rows.append(row)
            print(f"{task.task_id}: first {row['first_eval_s']:.1f} s, warm median {row['warm_eval_s_median']:.2f} s, "
                  f"screen of {len(screened)} points {screen_s:.1f} s ({row['screen_ok']} ok): a tuned candidate "
                  f"costs {row['tuned_cost_over_plain']:.2f}x a plain one", flush=True)
            for k, point in enumerate(screened):
                print(f"  point {k} {point.params}: {'ok' if point.ok else 'failed'} {point.seconds}", flush=True)
    finally:
        ev.close()
    judge_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    summary = {"device": a.device, "hardware": ev.hardware, "tasks": rows, "judge_peak_rss_mb": judge_rss_mb,
               "wall_s": time.monotonic() - t_start}
    print(f"judge peak RSS {judge_rss_mb:.0f} MB; wall {summary['wall_s']:.0f} s")
    if a.out:
        Path(a.out).write_text(json.dumps(summary, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
