"""The dispatcher's memory of what it judged (`actors.twins`, no Ray)."""

from __future__ import annotations

from actors.twins import TUNING_DEFERRED, Twins
from foundry.types import Candidate, EvalResult


def verdict(code: str, *, correct: bool = True, deferred: bool = False, task: str = "level1/1_T"):
    cand = Candidate.make(task_id=task, source=code, backend="c")
    result = EvalResult(candidate_id=cand.candidate_id, task_id=task, stage=5 if correct else 4, correct=correct,
                        runtime_ms=1.0 if correct else None, metrics={TUNING_DEFERRED: True} if deferred else {})
    return cand, result


def test_a_judged_code_is_handed_back_and_one_being_judged_is_known():
    twins = Twins()
    cand, result = verdict("# a")
    assert twins.settled(cand.task_id, cand.candidate_id) is None
    twins.start(cand.task_id, cand.candidate_id)
    assert twins.judging(cand.task_id, cand.candidate_id)
    twins.finish(cand.task_id, cand.candidate_id, (cand, result, "evaluator-0"))
    assert not twins.judging(cand.task_id, cand.candidate_id)
    assert twins.settled(cand.task_id, cand.candidate_id) == (cand, result, "evaluator-0")
    assert twins.settled("level1/2_Other", cand.candidate_id) is None  # the same code for another task


def test_no_verdict_is_kept_for_a_refusal_or_a_lost_evaluation():
    twins = Twins()
    cand, _ = verdict("# a")
    twins.start(cand.task_id, cand.candidate_id)
    twins.finish(cand.task_id, cand.candidate_id, None)
    assert twins.settled(cand.task_id, cand.candidate_id) is None and not twins.judging(cand.task_id, cand.candidate_id)


def test_earlier_sessions_verdicts_prime_it_but_not_the_failures_the_dispatcher_made():
    twins = Twins()
    judged, lost = verdict("# judged"), verdict("# lost", correct=False)
    assert twins.prime([(*judged, "evaluator-0"), (*lost, "")]) == 1
    assert twins.settled(judged[0].task_id, judged[0].candidate_id) == (*judged, "evaluator-0")
    assert twins.settled(lost[0].task_id, lost[0].candidate_id) is None


def test_an_untuned_verdict_is_judged_again_once_its_task_has_a_correct_kernel():
    twins = Twins()
    untuned = verdict("# tunable", deferred=True)
    twins.prime([(*untuned, "evaluator-0")])
    # its task is covered by that very verdict: the code is judged again, tuned this time
    assert twins.settled(untuned[0].task_id, untuned[0].candidate_id) is None
    wrong = verdict("# tunable, wrong", correct=False, deferred=True, task="level1/9_Uncovered")
    twins.prime([(*wrong, "evaluator-0")])
    # no correct kernel for that task: tuning would still wait, so the verdict stands
    assert twins.settled(wrong[0].task_id, wrong[0].candidate_id) == (*wrong, "evaluator-0")


def test_a_second_untuned_verdict_reached_with_the_task_covered_stands():
    """An evaluator that had not heard of the coverage judges the code untuned again: that
    verdict is handed back from then on, not judged a third time."""
    twins = Twins()
    untuned = verdict("# tunable", deferred=True)
    twins.prime([(*untuned, "evaluator-0")])
    key = (untuned[0].task_id, untuned[0].candidate_id)
    assert twins.settled(*key) is None
    twins.start(*key)
    again = verdict("# tunable", deferred=True)
    twins.finish(*key, (*again, "evaluator-1"))
    assert twins.settled(*key) == (*again, "evaluator-1")


def test_only_the_last_kept_verdicts_are_remembered():
    twins = Twins(kept=2)
    records = [verdict(f"# {i}") for i in range(3)]
    twins.prime([(*r, "evaluator-0") for r in records])
    assert twins.settled(records[0][0].task_id, records[0][0].candidate_id) is None
    assert all(twins.settled(c.task_id, c.candidate_id) for c, _ in records[1:])


def test_a_task_is_covered_once_a_candidate_of_it_is_judged_correct_here_or_primed():
    twins = Twins()
    wrong, wrong_result = verdict("# wrong", correct=False)
    twins.finish(wrong.task_id, wrong.candidate_id, (wrong, wrong_result, "evaluator-0"))
    assert not twins.covered(wrong.task_id)
    right, right_result = verdict("# right")
    twins.finish(right.task_id, right.candidate_id, (right, right_result, "evaluator-0"))
    assert twins.covered(right.task_id) and not twins.covered("level1/2_Other")
    primed = Twins()
    primed.prime([(right, right_result, "evaluator-0")])
    assert primed.covered(right.task_id)


def test_a_verdict_deferred_for_the_runs_breadth_first_wait_stands_until_the_wait_ends():
    """Judged untuned because some task of the run had no verdict yet: the same code comes
    back with that verdict while the wait lasts, and is judged again (tuned) after it, its
    task being covered; a second deferral of that kind does not make it stand."""
    from actors.twins import BREADTH
    twins = Twins()
    cand, result = verdict("# tunable")
    deferred = (cand, EvalResult(**{**result.__dict__, "metrics": {TUNING_DEFERRED: BREADTH}}), "evaluator-0")
    twins.start(cand.task_id, cand.candidate_id)
    twins.finish(cand.task_id, cand.candidate_id, deferred)
    assert twins.reached(cand.task_id) and not twins.reached("level1/2_Other")
    assert twins.settled(cand.task_id, cand.candidate_id, tuning_open=False) == deferred
    twins.start(cand.task_id, cand.candidate_id)
    twins.finish(cand.task_id, cand.candidate_id, deferred)  # deferred again, the task already covered
    assert twins.settled(cand.task_id, cand.candidate_id, tuning_open=True) is None
