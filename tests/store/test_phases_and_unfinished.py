"""Where the judge's time went (phase sums, judged candidates per minute) and the
unfinished candidates of a stopped run, in run.json terms and in report.md."""

from __future__ import annotations

from foundry.store import EvaluationLog, RunDir
from foundry.store.phases import PhaseSums, judged_per_minute, phases_of
from foundry.store.report import build_report
from foundry.store.unfinished import Unfinished, read_unfinished, still_unfinished, write_unfinished
from foundry.types import Candidate, EvalResult


def _pair(i: int, task: str = "t1", phases=None):
    c = Candidate.make(task_id=task, source=f"# kernel {i}\n", backend="c", island_id=i % 2)
    metrics = {} if phases is None else {"phases": phases}
    r = EvalResult(candidate_id=c.candidate_id, task_id=task, stage=5, correct=True, speedup_eager=1.0,
                   eval_s=1.0, metrics=metrics)
    return c, r


def test_phase_sums_per_run_and_task_skip_what_is_not_seconds():
    sums = PhaseSums()
    assert sums.add(task_id="a", result=_pair(0, "a", {"build": 2.0, "trials": 1.0})[1])
    assert sums.add(task_id="b", result=_pair(1, "b", {"build": 1.0, "timing": 4.0, "odd": "x",
                                                       "neg": -1, "flag": True})[1])
    assert not sums.add(task_id="a", result=_pair(2, "a")[1])  # no breakdown: not counted
    assert phases_of(_pair(3, phases={"nan": float("nan"), "ok": 0})[1]) == {"ok": 0.0}
    assert sums.evaluations == 2 and sums.seconds == 8.0
    assert sums.top(2) == [("timing", 4.0), ("build", 3.0)]
    out = sums.to_json()
    assert out["phases_s"] == {"build": 3.0, "timing": 4.0, "trials": 1.0}
    assert out["phases_evaluations"] == 2 and out["phases_by_task_s"]["a"] == {"build": 2.0, "trials": 1.0}


def test_a_tasks_first_time_setup_sums_the_phases_it_pays_once():
    sums = PhaseSums()
    sums.add(task_id="a", result=_pair(0, "a", {"task_setup": 0.5, "degeneracy": 3.0, "baseline_eager": 1.0,
                                                "baseline_compile": 4.0, "trials": 9.0})[1])
    sums.add(task_id="a", result=_pair(1, "a", {"degeneracy": 0.2, "trials": 2.0})[1])  # another lane's cached read
    sums.add(task_id="b", result=_pair(2, "b", {"baseline_eager": 2.0})[1])
    sums.add(task_id="c", result=_pair(3, "c", {"trials": 1.0})[1])  # its setup paid in no recorded evaluation
    assert sums.first_time_setup() == {"a": 8.7, "b": 2.0}


def test_judged_per_minute_is_steady_state_per_session():
    # a session records a batch per poll: 3 at t=100, then 2 more by t=110 -> 2 in 10 s
    assert judged_per_minute({"s1": [100.0, 100.01, 100.02, 105.0, 110.0]}) == 12.0
    assert judged_per_minute({"s1": [100.0, 100.1], "s2": [5.0]}) is None  # too short to tell
    two = judged_per_minute({"s1": [0.0, 30.0, 60.0], "s2": [1000.0, 1060.0]})  # 3 in 120 s
    assert two == 1.5


def test_the_driver_summary_and_the_report_show_where_time_went(tmp_path):
    from foundry.progress import RunProgress
    progress = RunProgress.for_tasks(["t1", "t2"])
    log = EvaluationLog(tmp_path, flush_s=1e9)
    for i in range(6):
        phases = {"build": 1.0 + i, "trials": 0.5, **({"tuning": 10.0} if i == 5 else {}),
                  **({"baseline_eager": 2.0 + i} if i < 2 else {})}
        c, r = _pair(i, "t1" if i % 2 else "t2", phases)
        log.append(c, r, evaluator="e")
        progress.record(c, r, at=1000.0 + 10 * i)
    c, r = _pair(9, "t1")  # an evaluation without a breakdown
    log.append(c, r)
    progress.record(c, r, at=1060.0)
    log.close()
    summary = progress.session_summary()
    assert summary["evaluations"] == 7 and summary["phases_evaluations"] == 6
    assert summary["phases_s"] == {"baseline_eager": 5.0, "build": 21.0, "tuning": 10.0, "trials": 3.0}
    assert summary["phases_by_task_s"]["t1"]["tuning"] == 10.0
    assert summary["judged_per_min"] == 6.0  # 6 after the first, in 60 s
    text = build_report(tmp_path).read_text()
    assert "## Where the judge's time went" in text
    assert "| build | 21.0 s | 54% | 3.5 s |" in text
    assert "eager and torch.compile baselines), 2 tasks: median 2.5 s, longest 3 s (t1)." in text
    assert "Phases of 6 of 7 evaluations" in text
    assert "Judged candidates per minute: " in text


def test_unfinished_round_trip_carry_over_and_report(tmp_path):
    cands = [_pair(i)[0] for i in range(3)]
    old = [Unfinished(candidate=c, evaluator="evaluator-0" if i == 0 else "", running_s=12.5 if i == 0 else None,
                      reason="wall-time budget of 3 s spent", stopped_at=1.0) for i, c in enumerate(cands)]
    write_unfinished(tmp_path, old + old[:1])  # once per island and candidate
    assert read_unfinished(tmp_path) == old
    (tmp_path / "unfinished.jsonl").open("a").write("{not json\n")
    assert read_unfinished(tmp_path) == old  # a damaged line is skipped
    again = Unfinished(candidate=cands[2], evaluator="evaluator-1", running_s=1.0)
    kept = still_unfinished(old, evaluated_ids={cands[0].candidate_id}, new=[again])
    assert kept == [old[1], again]  # evaluated since: gone; recorded again: the new record
    write_unfinished(tmp_path, kept)
    RunDir(tmp_path).write_meta({"tasks": ["t1"]})
    text = build_report(tmp_path).read_text()
    assert "## Unfinished when the run stopped" in text and "2 candidate(s)" in text
    assert f"| t1 | {cands[2].candidate_id} | 0 | evaluator-1 | 1 s |" in text
    assert f"| t1 | {cands[1].candidate_id} | 1 | — | queued |" in text
    write_unfinished(tmp_path, [])
    assert not (tmp_path / "unfinished.jsonl").exists() and read_unfinished(tmp_path) == []
