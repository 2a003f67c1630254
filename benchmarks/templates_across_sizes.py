"""Template candidates emitted at a task's own sizes, run at its other sizes: the judge
checks a large task's candidates at its SMALL_SIZES and every task's at its declared shape
variants, with a model built from those sizes' init inputs. A template that fixes an
init-dependent value (a group count, a channel count) at the traced sizes passes at the
published sizes and fails there. On the CPU, Triton's interpreter runs the Triton
templates (the `c` backend's are emitted and run at the same sizes they are judged at).

    python benchmarks/templates_across_sizes.py [--path benchmarks/suite] [--level 1 2 3]
        [--only SUBSTR ...] [--out rows.json]

Outputs are compared by the judge's rule (`foundry.evaluate.compare`, the task's
tolerance or its dtype's). Prints one line per task and template variant (the largest
error at each other size set, or why it failed) and a summary; exits 1 if any candidate
disagrees with its reference or fails to run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")
sys.path.append(str(Path(__file__).resolve().parents[1]))  # foundry from a source tree, if not installed

import torch  # noqa: E402

from foundry.evaluate.compare import compare  # noqa: E402
from foundry.evaluate.config import EvalConfig  # noqa: E402
from foundry.evaluate.job_plan import variants_for  # noqa: E402
from foundry.tasks.loader import build_module  # noqa: E402
from foundry.templates.engine import coverage, emit, variants  # noqa: E402
from foundry.tuning.inprocess import load_candidate  # noqa: E402
from task_args import add_task_arguments, selected_tasks  # noqa: E402

SEED = 7


def other_sizes(task) -> list[dict]:
    """The override dicts the judge checks besides the task's own sizes (its rule,
    `job_plan.variants_for`, with the default trials, for a large task)."""
    return [dict(v) for v in variants_for(task, EvalConfig(), large=True)[1:]]


def run_at(task, source: str, overrides: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """(reference output, candidate output) of models built at `overrides` from the same
    seed, on the same inputs."""
    module = build_module(task, overrides)
    torch.manual_seed(SEED)
    init = list(module.get_init_inputs())
    model = module.Model(*init).eval()
    inputs = list(module.get_inputs())
    candidate = load_candidate(source, {})
    torch.manual_seed(SEED)
    new = candidate.ModelNew(*init).eval()
    with torch.no_grad():
        return model(*inputs), new(*inputs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_task_arguments(ap, profile=None)
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    tasks = selected_tasks(a, profile="full")
    rows, bad = [], 0
    for task in tasks:
        sets = other_sizes(task)
        if not sets or coverage(task) is not None:
            continue
        for variant in variants(task, "triton"):
            t0 = time.monotonic()
            row = {"task": task.task_id, "variant": variant, "sizes": sets, "errors": []}
            try:
                source = emit(task, backend="triton", variant=variant)
                for overrides in sets:
                    verdict = compare(*run_at(task, source, overrides), atol=task.atol, rtol=task.rtol)
                    row["errors"].append(verdict.max_abs_err)
                    row["ok"] = row.get("ok", True) and verdict.ok
                    if not verdict.ok:
                        row["message"] = verdict.message[:300]
            except Exception as e:  # noqa: BLE001 - one candidate's failure is reported, the rest go on
                row["ok"], row["raised"] = False, f"{type(e).__name__}: {e}"[:300]
            row["seconds"] = round(time.monotonic() - t0, 1)
            bad += not row["ok"]
            rows.append(row)
            what = row.get("raised") or row.get("message") or ", ".join(f"{e:.2g}" for e in row["errors"])
            print(f"{'ok ' if row['ok'] else 'BAD'} {task.task_id} [{variant}] {what} ({row['seconds']} s)", flush=True)
            if a.out:
                Path(a.out).write_text(json.dumps(rows, indent=1))
    print(f"{len(rows)} candidates of {len(tasks)} tasks run at their other sizes: {bad} disagree or fail")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
