"""Run every template candidate of the suite (each variant that applies) through the real
judge (foundry.evaluate) and print its verdict: stage, correctness, guard flags, speedup
over eager (and over torch.compile with --compile-baseline) and its judged time.

    python benchmarks/templates_judge.py [--backend c|triton] [--level 1 2 3] [--only SUBSTR ...]
        [--path DIR] [--device cpu|cuda] [--profile small|full] [--compile-baseline]

`--path`: another folder of task files (e.g. KernelBench's problems) instead of the suite.

On a machine without a GPU the `triton` backend runs under Triton's interpreter
(set TRITON_INTERPRET=1), so its timings mean nothing there; `c` timings are real.
"""

from __future__ import annotations

import argparse
import collections
import sys

from task_args import add_task_arguments, selected_tasks


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="c", choices=["c", "triton"])
    add_task_arguments(ap, profile="small")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--compile-baseline", action="store_true")
    a = ap.parse_args()
    from foundry.evaluate import Evaluator
    from foundry.evaluate.config import EvalConfig
    from foundry.templates.engine import coverage, emit, variants
    from foundry.templates import NotCovered
    from foundry.types import Candidate

    cfg = EvalConfig.from_config({"device": a.device, "trials": a.trials, "compile_baseline": a.compile_baseline})
    flags = collections.Counter()
    n_ok = n_cov = 0
    with Evaluator(config=cfg) as ev:
        for task in selected_tasks(a):
            why = coverage(task)
            if why:
                print(f"{task.task_id:42s} {why}", flush=True)
                continue
            names = variants(task, a.backend)
            try:
                sources = [(v, emit(task, backend=a.backend, variant=v)) for v in names]
            except NotCovered as e:  # covered by another backend's templates only
                print(f"{task.task_id:42s} {e}", flush=True)
                continue
            n_cov += 1
            correct = False
            for variant, src in sources:
                cand = Candidate.make(task_id=task.task_id, source=src, backend=a.backend, origin="template")
                r = ev.evaluate(task=task, candidate=cand)
                correct |= bool(r.correct)
                flags.update(r.flags)
                sp = f"{r.speedup_eager:.2f}x" if r.speedup_eager else "-"
                spc = f" vs torch.compile={r.speedup_compile:.2f}x" if r.speedup_compile else ""
                label = task.task_id if len(names) == 1 else f"{task.task_id} [{variant}]"
                ms = f" runtime={r.runtime_ms:.3f}ms" if r.correct and r.runtime_ms else ""
                print(f"{label:42s} stage={r.stage} correct={r.correct} speedup={sp}{spc}{ms} "
                      f"flags={list(r.flags)} {r.error[:160]!r}", flush=True)
            n_ok += correct
    print(f"\ncorrect {n_ok}/{n_cov} covered; guard flags: {dict(flags)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
