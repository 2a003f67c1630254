"""The run directory the view's tests read: a short real run (the smoke config through the
real driver, Ray, evaluator and template engine), plus candidates written through the
store's own writer whose text tries to break out of the page."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

from foundry.store import EvaluationLog, read_evaluations
from foundry.store.summary import best_record
from foundry.types import Candidate, EvalResult, Stage

ROOT = Path(__file__).resolve().parents[2]
SCRIPT_PAYLOAD = "</script><script>alert(1)</script>"
ERROR_PAYLOAD = "<img src=x onerror=alert(2)>"
HOSTILE_TASK = "relu"  # the smoke task the hostile candidates are children in


def smoke_run(run_dir: Path) -> Path:
    """`python -m foundry +exp=smoke` into `run_dir` (its own Ray, in a subprocess)."""
    out = subprocess.run([sys.executable, "-m", "foundry", "+exp=smoke", f"hydra.run.dir={run_dir}",
                          "run.progress=log"], cwd=ROOT, capture_output=True, text=True, timeout=280,
                         env={**os.environ, "HYDRA_FULL_ERROR": "1"})
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return run_dir


def add_hostile_candidates(run_dir: Path) -> dict[str, str]:
    """Append to the log, through EvaluationLog, two children of the relu task's best kernel:
    one judged correct and faster (so it is the task's best, in the lineage and the
    archive) whose source holds SCRIPT_PAYLOAD, one that failed with ERROR_PAYLOAD as its
    error. Returns their eval ids and the parent's candidate id."""
    records = [r for r in read_evaluations(run_dir) if r.candidate.task_id == HOSTILE_TASK]
    parent = best_record(records)
    assert parent is not None, "the smoke run found no correct relu kernel"
    source = parent.candidate.source + f"\n# a comment a model might write: {SCRIPT_PAYLOAD}\n"
    child = Candidate.make(task_id=HOSTILE_TASK, source=source, backend=parent.candidate.backend,
                           params=parent.candidate.params, parent_ids=(parent.candidate.candidate_id,),
                           island_id=parent.candidate.island_id, generation=parent.candidate.generation + 1,
                           strategy_id=parent.candidate.strategy_id, origin=parent.candidate.origin)
    faster = dataclasses.replace(parent.result, candidate_id=child.candidate_id,
                                 speedup_eager=(parent.result.speedup_eager or 1.0) * 1.5)
    broken = Candidate.make(task_id=HOSTILE_TASK, source=source.replace("ModelNew", "ModelOld"),
                            backend=parent.candidate.backend, parent_ids=(parent.candidate.candidate_id,),
                            island_id=parent.candidate.island_id, generation=parent.candidate.generation + 2,
                            strategy_id=parent.candidate.strategy_id, origin=parent.candidate.origin)
    failed = EvalResult(candidate_id=broken.candidate_id, task_id=HOSTILE_TASK, stage=int(Stage.COMPILE),
                        correct=False, error=f"no ModelNew in the file {ERROR_PAYLOAD}",
                        descriptor=parent.result.descriptor, hardware=parent.result.hardware)
    log = EvaluationLog(run_dir)
    good = log.append(child, faster, evaluator="evaluator-0")
    bad = log.append(broken, failed, evaluator="evaluator-0")
    log.close()
    return {"script": good.eval_id, "error": bad.eval_id, "parent": parent.candidate.candidate_id}
