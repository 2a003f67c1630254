"""Per-candidate overhead of the evaluator on the CPU, with a warm worker reused.

    python benchmarks/eval_overhead.py [--candidates 10] [--trials 5]

Prints, per phase: warm worker start (once), c build (cold and cached), correctness
(trials + repeat + reference + comparison), timing (protocol run), and the whole
evaluation minus the kernel's own timed time. Target: < 1.5 s per candidate.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from foundry.evaluate import EvalConfig, Evaluator  # noqa: E402
from foundry.evaluate import sandbox  # noqa: E402
import foundry.evaluate.evaluator as evaluator_module  # noqa: E402
from foundry.tasks import load_task  # noqa: E402
from foundry.types import Candidate  # noqa: E402

SOURCE = (ROOT / "tests" / "exploits" / "candidates" / "honest_relu_c.py").read_text()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--candidates", type=int, default=10)
    ap.add_argument("--trials", type=int, default=5)
    args = ap.parse_args()
    phases: list[dict] = []
    original = sandbox.run_job

    def traced(*a, **k):
        t0 = time.monotonic()
        out = original(*a, **k)
        at = {m.header.get("kind"): m.at - t0 for m in reversed(out.messages)}
        first = {}
        for m in out.messages:
            first.setdefault(m.header.get("kind"), m.at - t0)
        if "timing" in at:
            phases.append({"fork_to_ready": first.get("ready", 0), "build": first["compiled"] - first["ready"],
                           "trials": first["idle"] - first["compiled"],
                           "timing_phase": at["timing"] - first["idle"],
                           "timed_ms": sum(out.of_kind("timing")[0].header["block_ns"]) / 1e6,
                           "worker_total": out.wall_s})
        return out

    evaluator_module.run_job = traced
    cache = tempfile.mkdtemp()
    t0 = time.monotonic()
    ev = Evaluator(config=EvalConfig.from_config({"trials": args.trials, "compile_baseline": False,
                                                  "baseline_cache_dir": cache}))
    ev._worker.start()
    start_s = time.monotonic() - t0
    task = load_task(ROOT / "benchmarks" / "smoke" / "relu.py")
    ev.baselines(task=task)
    rows = []
    for i in range(args.candidates):
        # a different source each time: the first build of each is a cold c build
        src = SOURCE.replace("relu_kernel", f"relu_kernel_{i}_{int(time.time())}")
        cold = ev.evaluate(task=task, candidate=Candidate.make(task_id=task.task_id, source=src, backend="c"))
        warm = ev.evaluate(task=task, candidate=Candidate.make(task_id=task.task_id, source=src, backend="c",
                                                               params={"UNUSED": 2}))
        assert cold.correct and warm.correct, (cold.error, warm.error)
        rows.append((cold, warm))
    ev.close()
    judge_s = [w.eval_s - w.metrics["worker_wall_s"] for _, w in rows]
    cold_build = [c.compile_s for c, _ in rows]
    warm_build = [w.compile_s for _, w in rows]
    warm_phases = phases[1::2]
    med = statistics.median
    timed = med([p["timed_ms"] for p in warm_phases]) / 1000
    print(f"warm worker start (once): {start_s:.2f} s")
    print(f"c build, cold (new source): median {med(cold_build):.3f} s, max {max(cold_build):.3f} s")
    print(f"c build, cached:            median {med(warm_build):.3f} s")
    print(f"fork to ready (child start + inputs): median {med([p['fork_to_ready'] for p in warm_phases]):.3f} s")
    print(f"correctness trials ({args.trials} + repeat) in the worker: median {med([p['trials'] for p in warm_phases]):.3f} s")
    print(f"timing phase (probe + warm-up + timed blocks): median {med([p['timing_phase'] for p in warm_phases]):.3f} s"
          f" of which the kernel's timed runs {timed:.3f} s")
    print(f"judge side (reference, compare, guards): median {med(judge_s):.3f} s")
    total_warm = [w.eval_s for _, w in rows]
    total_cold = [c.eval_s for c, _ in rows]
    print(f"per candidate, cached build: median {med(total_warm):.3f} s; "
          f"excluding the kernel's timed runs: {med(total_warm) - timed:.3f} s")
    print(f"per candidate, cold build:   median {med(total_cold):.3f} s; "
          f"excluding the kernel's timed runs: {med(total_cold) - timed:.3f} s (target < 1.5 s)")


if __name__ == "__main__":
    main()
