"""The driver stops on time however long evaluations take (in-process, on the session's
Ray): with a stand-in evaluator that takes ten minutes per candidate, a run with a
wall-time budget of a few seconds ends within `run.stop_timeout_s` (plus the fixed
finishing time) of its budget; what was in flight is recorded as unfinished, nothing as
evaluated; a resumed run evaluates those candidates again."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from actors.supervisor import FINISH_S
from foundry.store import read_evaluations
from foundry.store.unfinished import read_unfinished

pytestmark = pytest.mark.timeout(120)
ROOT = Path(__file__).resolve().parents[2]
WALL_S, STOP_S = 12.0, 2.0  # the budget leaves the actors time to start on a busy machine (6 s did not, once)


def _cfg(*overrides: str):
    from hydra import compose, initialize_config_module
    with initialize_config_module(config_module="foundry.conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=[
            "+exp=smoke", f"tasks.path={ROOT / 'benchmarks' / 'smoke' / 'relu.py'}", "island.count=1",
            "ray.cpu_evaluators=1", "ray.max_gpu_evaluators=1", "ray.evaluator_cpus=0", "ray.slots_per_evaluator=1",
            "run.in_flight_per_island=2",
            "run.evaluator_impl=actors.standins:fixed_cost_evaluator",
            "run.proposer_impl=actors.standins:copy_kernel_proposer", "run.tune=false",
            "run.progress=off", *overrides])
    return OmegaConf.create(OmegaConf.to_container(cfg, resolve=False))


def test_the_run_ends_on_time_and_resume_evaluates_the_unfinished(ray_session, tmp_path, monkeypatch):
    from foundry import run as run_module
    run_dir = tmp_path / "run"
    monkeypatch.setattr(run_module, "_hydra_output_dir", lambda: run_dir)
    t0 = time.monotonic()
    run_module.run(_cfg("+evaluator.cost_s=600", "budget.evaluations=null", f"budget.wall_time_s={WALL_S}",
                        f"run.stop_timeout_s={STOP_S}"))
    wall = time.monotonic() - t0
    meta = json.loads((run_dir / "run.json").read_text())
    session = meta["sessions"][-1]
    assert "wall-time budget" in meta["stop_reason"]
    # the stop itself: the wait for work in flight, then the fixed finishing time at most
    assert session["stop_s"] <= STOP_S + FINISH_S + 1.0, session
    # the whole run: start-up, the budget, the stop and the report (the evaluation takes 600 s)
    assert wall <= WALL_S + STOP_S + FINISH_S + 15.0, wall
    assert read_evaluations(run_dir) == []  # nothing finished, nothing recorded as evaluated
    unfinished = read_unfinished(run_dir)
    assert len(unfinished) == 2, unfinished  # one being evaluated, one queued behind it (one slot)
    running = [u for u in unfinished if u.evaluator]
    assert [u.evaluator for u in running] == ["evaluator-0"] and running[0].running_s > 0
    assert all(u.candidate.task_id == "relu" and u.candidate.source for u in unfinished)
    assert {u["candidate_id"] for u in session["unfinished"]} == {u.candidate.candidate_id for u in unfinished}
    report = (run_dir / "report.md").read_text()
    assert "## Unfinished when the run stopped" in report and running[0].candidate.candidate_id in report

    # resumed with a fast evaluator: the unfinished candidates are evaluated first, then no longer listed
    saved = OmegaConf.load(run_dir / "config.yaml")
    OmegaConf.update(saved, "evaluator.cost_s", 0.0, merge=False)
    OmegaConf.update(saved, "budget.evaluations", 4, merge=False)
    OmegaConf.update(saved, "budget.wall_time_s", 60, merge=False)
    OmegaConf.save(saved, run_dir / "config.yaml")
    run_module.run(OmegaConf.create({"resume": str(run_dir)}))
    records = read_evaluations(run_dir)
    assert len(records) == 4 and all(r.result.correct for r in records)
    assert {u.candidate.candidate_id for u in unfinished} <= {r.candidate.candidate_id for r in records}
    assert read_unfinished(run_dir) == [] and not (run_dir / "unfinished.jsonl").exists()
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["sessions"][-1]["unfinished"] == [] and meta["sessions"][-1]["evaluations"] == 4


def test_a_second_ctrl_c_stops_at_once_and_still_records_the_unfinished(ray_session, tmp_path, monkeypatch):
    import ray

    from actors.supervisor import Supervisor
    from foundry import run as run_module
    run_dir = tmp_path / "run"
    monkeypatch.setattr(run_module, "_hydra_output_dir", lambda: run_dir)
    check = Supervisor._check_budgets

    def ctrl_c_once_evaluating(self):  # the first Ctrl-C, once an evaluation is running
        if ray.get(self.dispatcher.stats.remote())["busy"]:
            raise KeyboardInterrupt
        return check(self)

    def ctrl_c_again(self, *, until):  # the second, while the driver waits for work in flight
        raise KeyboardInterrupt
    monkeypatch.setattr(Supervisor, "_check_budgets", ctrl_c_once_evaluating)
    monkeypatch.setattr(Supervisor, "_wait_for_work", ctrl_c_again)
    run_module.run(_cfg("+evaluator.cost_s=600", "budget.wall_time_s=60", "run.stop_timeout_s=60"))
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["stop_reason"] == "interrupted (Ctrl-C); stopped at once"
    assert meta["sessions"][-1]["stop_s"] <= FINISH_S + 1.0  # not the 60 s of stop_timeout_s
    assert read_evaluations(run_dir) == [] and len(read_unfinished(run_dir)) == 2
