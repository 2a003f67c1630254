"""Against a local head node (started with `ray start --head`, token authentication, the
dashboard on): the main job submitted with `ray job submit --working-dir .` as the README
shows it, and a two-job Hydra sweep with `ray.address=auto`. The submitted job runs in
Ray's copy of the checkout, finds the tasks there, writes to the absolute
`hydra.run.dir`, and its output reaches `ray job logs`; the sweep runs both jobs on this
cluster (not on a local Ray of their own) and leaves it as it found it: the same node,
no actor of the jobs left alive."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from foundry.store import read_evaluations

pytestmark = pytest.mark.timeout(240)
ROOT = Path(__file__).resolve().parents[2]
STANDINS = ["run.backend=c", "ray.evaluator_cpus=0", "ray.cpu_evaluators=2",
            "run.evaluator_impl=actors.standins:fixed_cost_evaluator", "+evaluator.cost_s=0.2",
            "run.proposer_impl=actors.standins:copy_kernel_proposer", "run.tune=false", "run.progress=log"]
EXCLUDES = '{"excludes": ["runs/", "multirun/", "outputs/", ".venv/", ".git/"]}'


@pytest.fixture(scope="module")
def head(local_cluster_module):
    # the job's `python` is the one of this environment
    path = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    c = local_cluster_module.LocalCluster(base_port=24400, dashboard=True, env={"PATH": path})
    try:
        c.start_head(cpus=4, gpus=0)
        yield c
    finally:
        c.shutdown()


def _ray_cli(head, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    env = head.client_env()
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return subprocess.run([sys.executable, "-m", "ray.scripts.scripts", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _cluster_state(head) -> dict:
    """The head's node ids alive and the actors alive, asked in a fresh process."""
    code = ("import json, sys, ray; from ray.util.state import list_actors;"
            "ray.init(address=sys.argv[1], log_to_driver=False, configure_logging=False);"
            "nodes = sorted(n['NodeID'] for n in ray.nodes() if n['Alive']);"
            "actors = [a.class_name for a in list_actors(filters=[('state', '=', 'ALIVE')])];"
            "print(json.dumps({'nodes': nodes, 'actors': actors}))")
    out = subprocess.run([sys.executable, "-c", code, head.address], capture_output=True, text=True, timeout=90,
                         env=head.client_env())
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_ray_job_submit_with_the_working_dir(head, tmp_path):
    run_dir = tmp_path / "job-run"  # absolute: the job's working directory is a temporary copy
    job_id = f"kf-test-{uuid.uuid4().hex[:8]}"
    submit = _ray_cli(head, "job", "submit", "--address", head.dashboard_url, "--submission-id", job_id,
                      "--working-dir", ".", "--runtime-env-json", EXCLUDES, "--",
                      "python", "-m", "foundry", "+exp=smoke", "budget.evaluations=6", "island.count=1",
                      *STANDINS, "ray.address=auto", f"hydra.run.dir={run_dir}")
    assert submit.returncode == 0, submit.stdout[-3000:] + submit.stderr[-3000:]
    status = _ray_cli(head, "job", "status", "--address", head.dashboard_url, job_id)
    assert f"Job '{job_id}' succeeded" in status.stdout + status.stderr, status.stdout + status.stderr
    logs = _ray_cli(head, "job", "logs", "--address", head.dashboard_url, job_id)
    assert logs.returncode == 0 and "KernelFoundry: stopped: evaluation budget spent" in logs.stdout, logs.stdout[-3000:]
    records = read_evaluations(run_dir)
    assert len(records) == 6 and {r.candidate.task_id for r in records} <= {
        p.stem for p in (ROOT / "benchmarks" / "smoke").glob("*.py")}
    config = (run_dir / "config.yaml").read_text()
    assert "benchmarks/smoke" in config
    assert f"Report: {run_dir / 'report.md'}" in logs.stdout
    # the job's driver ran on the head node, in Ray's copy of the checkout, not in this one
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["sessions"][-1]["cluster"]["nodes"][0]["head"]


def test_a_two_job_sweep_runs_on_the_cluster_and_leaves_it_as_it_was(head, tmp_path):
    before = _cluster_state(head)
    sweep_dir = tmp_path / "sweep"
    cmd = [sys.executable, "-m", "foundry", "-m", "+exp=smoke", "budget.evaluations=4", "island.count=1,2",
           *STANDINS, "ray.address=auto", f"hydra.sweep.dir={sweep_dir}"]
    proc = subprocess.run(cmd, cwd=ROOT, env=head.client_env(), capture_output=True, text=True, timeout=200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    jobs = sorted(p for p in sweep_dir.iterdir() if p.is_dir() and (p / "run.json").exists())
    assert [p.name for p in jobs] == ["0", "1"]
    for job, islands in zip(jobs, (1, 2)):
        assert len(read_evaluations(job)) == 4
        summary = json.loads((job / "run.json").read_text())["sessions"][-1]["cluster"]
        # each job joined this cluster: its driver's node is the head's, no node of its own
        assert [n["node_id"] for n in summary["nodes"] if n["alive"]] == before["nodes"]
        assert len(summary["islands"]) == islands
    after = _cluster_state(head)
    assert after["nodes"] == before["nodes"]
    assert sorted(after["actors"]) == sorted(before["actors"]), after["actors"]
