"""The Ray shells on the session's Ray instance: GPU pinning, an evaluator killed mid-run
(its work re-queued, it restarts), an island actor killed (it restarts from its checkpoint)."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.timeout(120)


def _evaluators(ray, n, *, cost_s, gpu=False):
    from actors.evaluator_actor import EvaluatorActor, evaluator_options
    opts = evaluator_options(gpu=gpu, cpus=0 if gpu else 0.5, max_restarts=2, slots=1)
    return {f"ev-{k}": EvaluatorActor.options(**opts).remote(
        name=f"ev-{k}", eval_config={"cost_s": cost_s}, impl="actors.standins:fixed_cost_evaluator")
        for k in range(n)}


def test_one_evaluator_per_gpu(ray_session):
    ray = ray_session
    evs = _evaluators(ray, 2, cost_s=0.0, gpu=True)
    infos = ray.get([e.info.remote() for e in evs.values()])
    gpu_ids = [i["gpu_ids"] for i in infos]
    assert all(len(g) == 1 for g in gpu_ids) and gpu_ids[0] != gpu_ids[1]
    for e in evs.values():
        ray.kill(e)


def test_killed_evaluator_work_is_requeued_and_it_restarts(ray_session, relu_task):
    ray = ray_session
    from actors.dispatcher_actor import DispatcherActor
    from foundry.types import Candidate
    evs = _evaluators(ray, 2, cost_s=0.3)
    first_pid = ray.get(evs["ev-0"].info.remote())["pid"]
    disp = DispatcherActor.remote(budget=None, budget_per_key=None, retry_delay_s=0.2)
    ray.get(disp.add_evaluators.remote(evs, 1))
    cands = [Candidate.make(task_id=relu_task.task_id, source=f"# {i}", backend="c") for i in range(8)]
    refs = [disp.submit.remote(relu_task, c) for c in cands]
    time.sleep(0.45)  # both evaluators are busy with their second candidate
    ray.kill(evs["ev-0"], no_restart=False)
    outs = ray.get(refs)
    assert [r.candidate_id for _, r, _, _ in outs] == [c.candidate_id for c in cands]
    assert all(r.correct and not refusal for _, r, _, refusal in outs)
    stats = ray.get(disp.stats.remote())
    assert stats["requeued"] >= 1
    deadline = time.time() + 30
    while True:  # restarted by Ray: answers again from a new process
        try:
            info = ray.get(evs["ev-0"].info.remote(), timeout=5)
            break
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            assert time.time() < deadline, "the evaluator actor did not restart"
            time.sleep(0.3)
    assert info["pid"] != first_pid
    assert ray.get(disp.submit.remote(relu_task, Candidate.make(task_id=relu_task.task_id, source="# x", backend="c")))[1].correct
    for e in evs.values():
        ray.kill(e)
    ray.kill(disp)


def test_killed_island_actor_restarts_from_its_checkpoint(ray_session, relu_task, tmp_path):
    ray = ray_session
    from actors.dispatcher_actor import DispatcherActor
    from actors.island_actor import IslandActor
    evs = _evaluators(ray, 1, cost_s=0.0)
    disp = DispatcherActor.remote(budget=None, budget_per_key=None)
    ray.get(disp.add_evaluators.remote(evs, 1))
    settings = {"island": {"count": 1}, "llm": {"provider": "none"}, "templates": {}, "backend": "c",
                "in_flight": 2, "checkpoint_every_s": 0.3, "seed": 0,
                "proposer_impl": "actors.standins:copy_kernel_proposer"}
    actor = IslandActor.options(max_restarts=2, max_task_retries=0).remote(
        island_index=0, tasks={relu_task.task_id: relu_task}, settings=settings, dispatcher=disp,
        prompt_actor=None, checkpoint_dir=str(tmp_path))
    run_ref = actor.run.remote()
    drained = []
    deadline = time.time() + 30
    while len(drained) < 20:
        drained += ray.get(actor.drain.remote())["records"]
        assert time.time() < deadline
        time.sleep(0.1)
    time.sleep(0.5)  # a checkpoint after those
    first = ray.get(actor.status.remote())
    ray.kill(actor, no_restart=False)
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(run_ref, timeout=30)
    deadline = time.time() + 30
    while True:
        try:
            status = ray.get(actor.status.remote(), timeout=5)
            break
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            assert time.time() < deadline, "the island actor did not restart"
            time.sleep(0.3)
    assert status["pid"] != first["pid"] and status["restored"] == 1
    ray.get(actor.replay.remote([(c, r) for c, r, _ in drained]))
    held = ray.get(actor.status.remote())["held"][relu_task.task_id]
    assert held >= len(drained)  # everything drained before the kill is on the island
    ray.get(actor.stop.remote("test over"))
    for e in evs.values():
        ray.kill(e)
    ray.kill(actor)
    ray.kill(disp)


def test_a_resumed_runs_dispatcher_does_not_judge_again_what_an_earlier_session_judged(ray_session, relu_task):
    ray = ray_session
    from actors.dispatch import TWIN
    from actors.dispatcher_actor import DispatcherActor
    from foundry.types import Candidate, EvalResult
    evs = _evaluators(ray, 1, cost_s=0.1)
    earlier = Candidate.make(task_id=relu_task.task_id, source="# judged before the resume", backend="c", island_id=0)
    result = EvalResult(candidate_id=earlier.candidate_id, task_id=relu_task.task_id, stage=5, correct=True,
                        runtime_ms=2.0)
    disp = DispatcherActor.remote(budget=None, budget_per_key=None, judged=[(earlier, result, "evaluator-0")])
    ray.get(disp.add_evaluators.remote(evs, 1))
    again = Candidate.make(task_id=relu_task.task_id, source="# judged before the resume", backend="c", island_id=3)
    answer = ray.get(disp.submit.remote(relu_task, again))
    assert answer[3].startswith(TWIN + ":") and answer[1] == result and answer[2] == "evaluator-0"
    assert sum(ray.get(e.info.remote())["evaluated"] for e in evs.values()) == 0
    assert ray.get(disp.stats.remote())["submitted"] == 0  # no evaluation budget spent on it
    for e in evs.values():
        ray.kill(e)
    ray.kill(disp)


def test_an_evaluator_told_a_task_is_covered_tunes_its_candidates_from_the_start(ray_session, relu_task):
    """A resumed run tells its evaluators which tasks earlier sessions covered, so that with
    tune_uncovered false their TUNABLE candidates are not judged untuned again."""
    ray = ray_session
    from actors.evaluation import tuner_config
    from actors.evaluator_actor import EvaluatorActor, evaluator_options
    from actors.standins import copy_candidate_source
    from actors.twins import TUNING_DEFERRED
    from foundry.types import Candidate
    opts = evaluator_options(gpu=False, cpus=0, max_restarts=0, slots=1)
    tuning = tuner_config({"tune_budget": 8, "tune_exhaustive_max": 8, "tune_uncovered": False})
    cand = Candidate.make(task_id=relu_task.task_id, source=copy_candidate_source(relu_task, 7), backend="c")
    results = {}
    for covered in ((), (relu_task.task_id,)):
        ev = EvaluatorActor.options(**opts).remote(name="covered", eval_config={"cost_s": 0.0}, tuning=tuning,
                                                   impl="actors.standins:fixed_cost_evaluator", covered=covered)
        results[covered] = ray.get(ev.evaluate.remote(relu_task, cand))[1]
        ray.kill(ev)
    assert results[()].metrics.get(TUNING_DEFERRED) and "tuning" not in results[()].metrics
    told = results[(relu_task.task_id,)].metrics
    assert not told.get(TUNING_DEFERRED) and len(told["tuning"]) == 3


def test_an_evaluator_with_lanes_judges_that_many_candidates_at_once(ray_session, relu_task):
    ray = ray_session
    from actors.evaluator_actor import EvaluatorActor, evaluator_options
    from foundry.types import Candidate
    opts = evaluator_options(gpu=False, cpus=0, max_restarts=0, slots=2)
    ev = EvaluatorActor.options(**opts).remote(name="laned", eval_config={"cost_s": 1.0},
                                               impl="actors.standins:fixed_cost_evaluator", lanes=2)
    assert ray.get(ev.info.remote())["lanes"] == 2
    cands = [Candidate.make(task_id=relu_task.task_id, source=f"# {i}", backend="c") for i in range(2)]
    t0 = time.monotonic()
    refs = [ev.evaluate.remote(relu_task, c) for c in cands]
    time.sleep(0.3)
    busy_info = ray.get(ev.info.remote(), timeout=0.5)  # answers while both lanes are busy
    assert busy_info["evaluated"] == 0
    results = ray.get(refs)
    assert time.monotonic() - t0 < 1.8  # two 1-second evaluations side by side, not one after the other
    assert sorted(r[1].candidate_id for r in results) == sorted(c.candidate_id for c in cands)
    lanes = [r[1].metrics["lane"] for r in results]
    assert sorted(lane["index"] for lane in lanes) == [0, 1]
    assert all(1.0 <= lane["busy_s"] < 1.8 and abs(lane["started_at"] - time.time()) < 30 for lane in lanes)
    info = ray.get(ev.info.remote())
    assert info["evaluated"] == 2 and 2.0 <= info["busy_s"] < 3.6
    ray.kill(ev)


def test_the_same_candidate_from_two_islands_is_judged_once(ray_session, relu_task):
    """A twin under way is not waited for; a settled one's result is handed back."""
    ray = ray_session
    from actors.dispatch import TWIN, TWIN_PENDING
    from actors.dispatcher_actor import DispatcherActor
    from foundry.types import Candidate
    evs = _evaluators(ray, 2, cost_s=0.5)
    disp = DispatcherActor.remote(budget=None, budget_per_key=None)
    ray.get(disp.add_evaluators.remote(evs, 1))
    source = "# the same code"
    a = Candidate.make(task_id=relu_task.task_id, source=source, backend="c", island_id=0)
    b = Candidate.make(task_id=relu_task.task_id, source=source, backend="c", island_id=1)
    assert a.candidate_id == b.candidate_id
    answers = ray.get([disp.submit.remote(relu_task, a), disp.submit.remote(relu_task, b)])
    # an async actor may take either call first: one is judged; the other, its twin, comes
    # back at once without a result (nothing waits for an evaluation under way)
    first, twin = sorted(answers, key=lambda answer: answer[3] != "")
    assert first[3] == "" and first[1] is not None
    assert twin[3].startswith(TWIN_PENDING + ":") and twin[1] is None
    assert sum(ray.get(e.info.remote())["evaluated"] for e in evs.values()) == 1
    assert ray.get(disp.stats.remote())["submitted"] == 1  # the budget counts one evaluation
    # once settled, the same code from a third island gets that evaluation, not a new one
    c = Candidate.make(task_id=relu_task.task_id, source=source, backend="c", island_id=2)
    later = ray.get(disp.submit.remote(relu_task, c))
    assert later[3].startswith(TWIN + ":") and later[1] == first[1]
    assert sum(ray.get(e.info.remote())["evaluated"] for e in evs.values()) == 1
    assert ray.get(disp.stats.remote())["submitted"] == 1
    # other code for the same task is judged
    other = Candidate.make(task_id=relu_task.task_id, source="# other code", backend="c", island_id=2)
    assert ray.get(disp.submit.remote(relu_task, other))[3] == ""
    assert sum(ray.get(e.info.remote())["evaluated"] for e in evs.values()) == 2
    for e in evs.values():
        ray.kill(e)
    ray.kill(disp)


def test_candidates_are_judged_untuned_until_every_task_of_the_run_has_a_verdict(ray_session, relu_task):
    """Breadth first: while a task of the run has no verdict and other work waits, a
    TUNABLE candidate is judged at its own settings; the same code proposed after every
    task has one is judged again, tuned."""
    import dataclasses
    import time
    ray = ray_session
    from actors.evaluation import tuner_config
    from actors.evaluator_actor import EvaluatorActor, evaluator_options
    from actors.dispatcher_actor import DispatcherActor
    from actors.standins import copy_candidate_source
    from actors.twins import BREADTH, TUNING_DEFERRED
    from foundry.types import Candidate
    other = dataclasses.replace(relu_task, task_id="level1/2_Other")
    opts = evaluator_options(gpu=False, cpus=0, max_restarts=0, slots=1)
    ev = EvaluatorActor.options(**opts).remote(
        name="ev-0", eval_config={"cost_s": 1.0}, impl="actors.standins:fixed_cost_evaluator", covered=(relu_task.task_id,),
        tuning=tuner_config({"tune_budget": 8, "tune_exhaustive_max": 8, "tune_uncovered": True}))
    disp = DispatcherActor.remote(budget=None, budget_per_key=None, tasks=[relu_task.task_id, other.task_id])
    ray.get(disp.add_evaluators.remote({"ev-0": ev}, 1))
    busy = Candidate.make(task_id=relu_task.task_id, source="# holds the lane", backend="c", island_id=0)
    tunable = Candidate.make(task_id=relu_task.task_id, source=copy_candidate_source(relu_task, 7), backend="c",
                             island_id=0)
    waiting = Candidate.make(task_id=other.task_id, source="# the other task's first", backend="c", island_id=1)
    refs = [disp.submit.remote(relu_task, busy)]  # holds the one lane for 1 s while the other two queue
    time.sleep(0.2)
    refs.append(disp.submit.remote(relu_task, tunable))
    time.sleep(0.2)
    refs.append(disp.submit.remote(other, waiting))
    first = ray.get(refs)[1][1]
    assert first.metrics[TUNING_DEFERRED] == BREADTH and "tuning" not in first.metrics
    again = dataclasses.replace(tunable, island_id=2)
    _, tuned, _, refusal = ray.get(disp.submit.remote(relu_task, again))
    assert refusal == "" and len(tuned.metrics["tuning"]) == 3 and TUNING_DEFERRED not in tuned.metrics
    assert ray.get(disp.stats.remote())["breadth_reached"] is True
    ray.kill(ev)
    ray.kill(disp)
