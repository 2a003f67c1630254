"""What tests/cluster/ share: the main job run against a local multi-node cluster
(benchmarks/local_cluster.py), and what its run directory says about placement."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def evaluator_nodes(run_dir: Path) -> dict[str, dict]:
    """evaluators.json by evaluator name."""
    return {e["name"]: e for e in json.loads((run_dir / "evaluators.json").read_text())}


def run_main(cluster, run_dir: Path, *overrides: str, timeout: float = 200.0) -> subprocess.CompletedProcess:
    """The main job (`python -m foundry`) against the cluster, with stand-in evaluators that
    sleep `evaluator.cost_s` per candidate where Ray placed them, and the copy-kernel proposer
    (untuned, so that a candidate keeps the id it was submitted with), one candidate at a
    time per evaluator (one lane, as if each logical GPU timed one at a time)."""
    cmd = [sys.executable, "-m", "foundry", "+exp=smoke", "run.backend=c", "ray.evaluator_cpus=0",
           "run.evaluator_impl=actors.standins:fixed_cost_evaluator",
           "run.proposer_impl=actors.standins:copy_kernel_proposer", "run.tune=false", "ray.slots_per_evaluator=1",
           "run.progress=log",
           "run.progress_every_s=5", f"ray.address={cluster.address}", f"hydra.run.dir={run_dir}", *overrides]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env=cluster.client_env())
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc
