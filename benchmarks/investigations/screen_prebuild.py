"""A screen's wall time with its settings' kernels built ahead, several at once (the
judge's `screen_prebuild_workers`), against built one after another in its loop (0).

    python benchmarks/investigations/screen_prebuild.py --path DIR --only level1/66_ level1/46_
        [--points 8] [--workers 8 0] [--profile full] [--out FILE]

For each problem and each worker count, in a process of its own whose cache root (and
so Triton's cache) starts empty: the problem's first template variant, the tuner's
first `--points` settings (as the main job's first screen of it picks them), one
`Evaluator.screen` on the GPU. Printed, and with `--out` written as JSON: the screen's
wall seconds, its points' build-and-trial seconds summed (the first point's include the
prebuild), the prebuild's seconds and how many points it built, how many points were
correct and the fastest. Compare the worker counts within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def screen_once(a: argparse.Namespace) -> dict:
    """One screen of `a.one` with `a.workers[0]` prebuild workers, in this process."""
    from foundry.evaluate import Evaluator
    from foundry.evaluate.config import EvalConfig
    from foundry.tasks.suite import load_suite
    from foundry.templates.engine import emit, variants
    from foundry.tuning.space import points, read_tunable
    from foundry.types import Candidate

    task = next(t for t in load_suite(path=a.path, profile=a.profile) if t.task_id.startswith(a.one))
    variant = variants(task, "triton")[0]
    source = emit(task, backend="triton", variant=variant)
    settings = list(points(read_tunable(source), limit=a.points, exhaustive_max=32, seed=0))
    config = EvalConfig.from_config({"device": "cuda", "compile_baseline": False,
                                     "screen_prebuild_workers": a.workers[0]})
    candidate = Candidate.make(task_id=task.task_id, source=source, backend="triton", origin="template")
    with Evaluator(config=config) as judge:
        started = time.monotonic()
        screened = judge.screen(task=task, candidate=candidate, points=settings)
        wall = time.monotonic() - started
    first = screened[0].seconds if screened else {}
    fastest = min((p.runtime_ms for p in screened if p.ok and p.runtime_ms), default=None)
    return {"task": task.task_id, "variant": variant, "workers": a.workers[0], "points": len(settings),
            "screen_s": round(wall, 2),
            "build_trial_s": round(sum(p.seconds.get("build_trial_s", 0.0) for p in screened), 2),
            "prebuild_s": first.get("prebuild_s"), "prebuilt_points": first.get("prebuilt_points"),
            "correct": sum(1 for p in screened if p.ok), "fastest_ms": fastest,
            "errors": sorted({p.error[-200:] for p in screened if not p.ok})[:3]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--path", default=str(ROOT.parent / "shared" / "kernelbench"))
    ap.add_argument("--only", nargs="+", required=False, default=[], help="problems (task id prefixes)")
    ap.add_argument("--points", type=int, default=8)
    ap.add_argument("--workers", type=int, nargs="+", default=[8, 0])
    ap.add_argument("--profile", default="full")
    ap.add_argument("--one", default="", help=argparse.SUPPRESS)  # a child's problem
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    if a.one:
        print(json.dumps(screen_once(a)), flush=True)
        return 0
    if not a.only:
        raise SystemExit("--only: name at least one problem (e.g. level1/66_)")
    rows = []
    for problem in a.only:
        for workers in a.workers:
            env = {**os.environ, "FOUNDRY_CACHE_DIR": tempfile.mkdtemp(prefix="screen-prebuild-")}
            proc = subprocess.run([sys.executable, __file__, "--path", a.path, "--profile", a.profile,
                                   "--points", str(a.points), "--workers", str(workers), "--one", problem],
                                  capture_output=True, text=True, env=env)
            lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
            row = json.loads(lines[-1]) if proc.returncode == 0 and lines else \
                {"task": problem, "workers": workers, "error": proc.stderr[-1500:]}
            print(json.dumps(row), flush=True)
            rows.append(row)
    if a.out:
        Path(a.out).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
