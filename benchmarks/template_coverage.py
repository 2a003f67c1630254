"""Which tasks of a folder the template engine covers, per level, and why the others are
not: shapes only (each task is read on the meta device), so a KernelBench folder at its
published sizes takes seconds.

    python benchmarks/template_coverage.py [--path ../shared/kernelbench] [--levels 1 2] [--list]

Prints per level the covered count and the reasons for the rest, counted (with `--list`,
each uncovered task with its reason). Tasks that only a compiler seed or an LLM can serve
(a matmul followed by an op no template has, e.g. triu; an einsum) count as uncovered here.
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--path", default=str(ROOT.parent / "shared" / "kernelbench"))
    ap.add_argument("--levels", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--list", action="store_true", help="name each uncovered task")
    a = ap.parse_args()
    from foundry.tasks.suite import SuiteConfig
    from foundry.templates.engine import coverage
    prefix = "no template applies; needs an LLM "
    for level in a.levels:
        tasks = SuiteConfig.from_config({"path": a.path, "level": level, "ids": None}).load(device=None)
        reasons: collections.Counter = collections.Counter()
        for task in tasks:
            why = coverage(task)
            if why is None:
                continue
            reason = why.removeprefix(prefix)
            reasons[reason[:120]] += 1
            if a.list:
                print(f"  {task.task_id}: {reason[:160]}")
        print(f"level {level}: {len(tasks) - sum(reasons.values())} of {len(tasks)} covered")
        for reason, n in reasons.most_common():
            print(f"  {n:3d}  {reason}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
