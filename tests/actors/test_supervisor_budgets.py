"""The driver's budget checks (no actors started): target speedup per task, LLM cost,
wall time; resumed evaluations count."""

from __future__ import annotations

import dataclasses
import types

from actors.config import BudgetConfig, RunOptions
from actors.supervisor import Supervisor
from foundry.progress import RunProgress
from foundry.store import RunDir
from foundry.store.evallog import EvaluationRecord
from foundry.types import Candidate, EvalResult


class _Remote:
    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        return types.SimpleNamespace(remote=lambda *a: self.calls.append((name, a)))


def _sup(tmp_path, budget, prior=()):
    settings = types.SimpleNamespace(budget=BudgetConfig.from_config(budget), run=RunOptions(),
                                     raw={}, seed=0, ray=None)
    progress = RunProgress.for_tasks(["a", "b"])
    sup = Supervisor(settings=settings, run_dir=RunDir(tmp_path), tasks=[types.SimpleNamespace(task_id="a"),
                     types.SimpleNamespace(task_id="b")], backend="c", gpus=0, prior=list(prior),
                     evlog=None, progress=progress, view=types.SimpleNamespace(say=print, update=lambda: None))
    sup.dispatcher, sup.islands = _Remote(), {0: _Remote()}
    return sup


def _rec(task, speed, seq):
    c = Candidate(candidate_id=f"c{seq}", task_id=task, source="x", backend="c")
    r = EvalResult(candidate_id=c.candidate_id, task_id=task, stage=5, correct=True, speedup_eager=speed)
    return EvaluationRecord(candidate=c, result=r, eval_id=str(seq), seq=seq)


def test_target_speedup_retires_a_task_and_then_ends_the_run(tmp_path):
    sup = _sup(tmp_path, {"target_speedup": 1.5, "wall_time_s": None}, prior=[_rec("a", 2.0, 0), _rec("b", 1.1, 1)])
    assert sup.progress.evaluations == 2  # resumed evaluations count
    assert sup._check_budgets() == ""
    assert ("close", ("target speedup 1.5x reached", "a")) in sup.dispatcher.calls
    assert ("retire", ("a", "target speedup 1.5x reached")) in sup.islands[0].calls
    sup._note(_rec("b", 1.6, 2).candidate, _rec("b", 1.6, 2).result, session=True)
    assert "every task reached the target speedup" in sup._check_budgets()


def test_llm_cost_and_wall_time(tmp_path):
    sup = _sup(tmp_path, {"llm_cost_usd": 0.5, "wall_time_s": 1000})
    sup._add_calls([{"task_id": "a", "cost_usd": 0.3}])
    assert sup._check_budgets() == ""
    sup._add_calls([{"task_id": "b", "cost_usd": 0.3}])
    assert "LLM cost budget" in sup._check_budgets()
    assert (tmp_path / "llm_calls.jsonl").read_text().count("\n") == 2
    sup = _sup(tmp_path / "w", {"wall_time_s": 0})
    assert "wall-time budget" in sup._check_budgets()


def test_drained_results_add_their_judge_phases_to_the_session(tmp_path):
    from foundry.store import EvaluationLog, read_evaluations
    sup = _sup(tmp_path, {"wall_time_s": None})
    sup.evlog = EvaluationLog(tmp_path)
    records = []
    for seq, phases in enumerate(({"build": 2.0, "trials": 1.0}, {"build": 0.5, "tuning": 6.0}, None)):
        rec = _rec("a" if seq < 2 else "b", 1.2, seq)
        result = rec.result if phases is None else dataclasses.replace(rec.result, metrics={"phases": phases})
        records.append((rec.candidate, result, "evaluator-0"))
    sup._take_drained(0, {"records": records, "settled": ["c0", "c1", "c2"], "llm_calls": [], "retired": {}})
    sup.evlog.close()
    summary = sup.progress.session_summary()
    assert summary["evaluations"] == 3 and summary["phases_evaluations"] == 2
    assert summary["phases_s"] == {"tuning": 6.0, "build": 2.5, "trials": 1.0}
    assert summary["phases_by_task_s"] == {"a": {"tuning": 6.0, "build": 2.5, "trials": 1.0}}
    assert sup.settled_ids == {"c0", "c1", "c2"}
    assert [r.result.metrics for r in read_evaluations(tmp_path)][:2] == [
        {"phases": {"build": 2.0, "trials": 1.0}}, {"phases": {"build": 0.5, "tuning": 6.0}}]
