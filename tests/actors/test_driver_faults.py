"""The driver under faults, in-process on the session's Ray: an evaluator process and an
island actor process are SIGKILLed mid-run; the run still spends its whole budget, the
island restarts from its checkpoint, and no evaluation is lost or recorded twice."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from foundry.store import read_evaluations

pytestmark = pytest.mark.timeout(180)
ROOT = Path(__file__).resolve().parents[2]


def _cfg(run_dir: Path):
    from hydra import compose, initialize_config_module
    with initialize_config_module(config_module="foundry.conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=[
            "+exp=smoke", f"tasks.path={ROOT / 'benchmarks' / 'smoke' / 'relu.py'}",
            "budget.evaluations=60", "island.count=2", "ray.cpu_evaluators=2", "ray.evaluator_cpus=0.5",
            "run.evaluator_impl=actors.standins:fixed_cost_evaluator", "+evaluator.cost_s=0.1",
            "run.proposer_impl=actors.standins:copy_kernel_proposer", "run.checkpoint_every_s=0.5",
            "run.progress=log", "run.progress_every_s=60"])
    cfg = OmegaConf.to_container(cfg, resolve=False)
    return OmegaConf.create(cfg)


def test_killed_evaluator_and_island_processes(ray_session, tmp_path, capsys, monkeypatch):
    from foundry import run as run_module
    run_dir = tmp_path / "run"
    monkeypatch.setattr(run_module, "_hydra_output_dir", lambda: run_dir)
    killed = {}

    def killer():
        deadline = time.time() + 120
        while time.time() < deadline:
            time.sleep(0.2)
            try:
                n = len(read_evaluations(run_dir))
                worker = json.loads((run_dir / "checkpoints" / "island-0" / "worker.json").read_text())
                evs = json.loads((run_dir / "evaluators.json").read_text())
            except (OSError, ValueError):
                continue
            if n >= 10:
                os.kill(evs[0]["pid"], signal.SIGKILL)
                os.kill(worker["pid"], signal.SIGKILL)
                killed.update(evaluator=evs[0]["pid"], island=worker["pid"], at=n)
                return

    t = threading.Thread(target=killer, daemon=True)
    t.start()
    run_module.run(_cfg(run_dir))
    t.join(5)
    out = capsys.readouterr().out
    assert killed, "the run ended before the kill"
    assert "island 0: actor died" in out, out[-2000:]
    records = read_evaluations(run_dir)
    # the budget is spent at submission, and what the killed island had in flight or had not
    # handed over yet is recovered from the dispatcher's ledger: every submission is logged
    assert len(records) == 60, out[-2000:]
    keys = [(r.candidate.island_id, r.candidate.candidate_id) for r in records]
    assert len(set(keys)) == len(keys)
    nameless = [(r.seq, r.result.stage, r.result.error) for r in records if not r.evaluator]
    assert {r.evaluator for r in records} == {"evaluator-0", "evaluator-1"}, nameless
    late0 = [r for r in records if r.seq > killed["at"] + 2 and r.candidate.island_id == 0]
    assert late0, "island 0 produced nothing after its restart"
    assert json.loads((run_dir / "checkpoints" / "island-0" / "worker.json").read_text())["pid"] != killed["island"]
    assert "evaluation budget spent" in json.loads((run_dir / "run.json").read_text())["stop_reason"]
    # written again at the end: the restarted evaluator says what its lanes did since its restart
    final = {e["name"]: e for e in json.loads((run_dir / "evaluators.json").read_text())}
    assert set(final) == {"evaluator-0", "evaluator-1"} and final["evaluator-0"]["pid"] != killed["evaluator"]
    assert all(e["busy_s"] > 0 and e["evaluated"] > 0 for e in final.values())
