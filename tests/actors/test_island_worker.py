"""The island loop without Ray: real islands, the copy-kernel proposer, a fake evaluator."""

from __future__ import annotations

import asyncio
import dataclasses

from actors.island_host import IslandHost
from actors.island_worker import IslandWorker, SeedOutcome
from actors.parts import make_island
from actors.standins import CopyKernelProposer, FixedCostEvaluator, copy_candidate_source
from foundry.types import TASK_TOO_LARGE, Candidate, EvalResult, Stage


def budgeted_submit(budget):
    """The dispatcher's part, stood in: candidates judged at a fixed cost until `budget`
    evaluations (None: no limit), then every submission refused."""
    ev = FixedCostEvaluator()
    state = {"n": 0}

    async def submit(t, cand):
        await asyncio.sleep(0.001)
        if budget is not None and state["n"] >= budget:
            return cand, None, "", "all: evaluation budget spent"
        state["n"] += 1
        return cand, ev.evaluate(task=t, candidate=cand), "ev-0", ""
    return submit


def make_worker(task, *, index=0, budget=None, in_flight=3, proposer=None, prompts=None):
    hosts = {task.task_id: IslandHost(make_island(island={"count": 2}, island_index=index,
                                                  task_id=task.task_id, seed=0))}
    return IslandWorker(island_index=index, tasks={task.task_id: task}, hosts=hosts,
                        proposer=proposer or CopyKernelProposer(island_index=index), submit=budgeted_submit(budget),
                        prompts=prompts, backend="c", in_flight=in_flight)


class SameProposal(CopyKernelProposer):
    """Proposes the same kernel every time (after `delay_s`): every proposal after the
    first is a repeat."""

    def __init__(self, *, delay_s: float = 0.0, **kw):
        super().__init__(**kw)
        self.delay_s = delay_s

    async def propose(self, request):
        self.count = 0
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        return await super().propose(dataclasses.replace(request, generation=0, seed=0, island_id=0))


async def test_runs_until_the_budget_and_children_stay_on_their_island(relu_task):
    w = make_worker(relu_task, index=1, budget=12)
    reason = await w.run()
    assert reason == "evaluation budget spent"
    out = w.drain()["records"]
    assert len(out) == 12
    ids = {c.candidate_id for c, _, _ in out}
    assert len(ids) == 12
    island = w.hosts[relu_task.task_id].island
    assert all(c.island_id == 1 for c, _, _ in out)
    assert island.generation == 12
    assert all(r.descriptor for _, r, _ in out)  # the island filled the cell
    # every child after the first names a parent this island held
    held = set()
    for c, _, _ in out:
        assert all(p in held for p in c.parent_ids)
        held.add(c.candidate_id)
    assert sum(1 for c, _, _ in out if c.parent_ids) >= 12 - 3  # 3 in flight translate first
    assert w.drain()["records"] == []


async def test_duplicates_are_not_evaluated_and_retire_the_task(relu_task):
    w = make_worker(relu_task, proposer=SameProposal(), in_flight=1)
    w.max_duplicates = 5
    reason = await asyncio.wait_for(w.run(), 10)
    assert reason == "every task finished"
    assert len(w.drain()["records"]) == 1
    assert "already evaluated" in w.retired[relu_task.task_id]


async def test_a_task_too_large_for_the_judge_is_retired_after_its_first_result(relu_task):
    w = make_worker(relu_task, in_flight=1)
    calls = []

    async def too_large(t, cand):
        calls.append(cand.candidate_id)
        return cand, EvalResult(candidate_id=cand.candidate_id, task_id=t.task_id, stage=Stage.RUNTIME,
                                correct=False, flags=("task_error", TASK_TOO_LARGE),
                                error=f"task {t.task_id} is too large for this judge: ...\nmore"), "ev-0", ""
    w.submit = too_large
    reason = await asyncio.wait_for(w.run(), 10)
    assert reason == "every task finished" and len(calls) == 1
    assert w.retired[relu_task.task_id] == f"task {relu_task.task_id} is too large for this judge: ..."
    assert len(w.drain()["records"]) == 1  # the result is still logged


async def test_a_compiler_seed_reopens_a_task_retired_for_lack_of_new_proposals(relu_task):
    w = make_worker(relu_task, proposer=SameProposal(), in_flight=1)
    w.max_duplicates = 3
    assert await asyncio.wait_for(w.run(), 10) == "every task finished"
    assert len(w.drain()["records"]) == 1
    seed = Candidate.make(task_id=relu_task.task_id, source=copy_candidate_source(relu_task, 777), backend="c",
                          strategy_id="compiler:inductor")
    assert w.seed(seed) is SeedOutcome.QUEUED_LOOP_ENDED  # run() had returned: the caller runs it again
    assert w.open_tasks() == [relu_task.task_id]
    assert await asyncio.wait_for(w.run(), 10) == "every task finished"  # the loop goes on, then ends again
    judged = [c.candidate_id for c, _, _ in w.drain()["records"]]
    assert judged[0] == seed.candidate_id
    # a task retired for another reason (a budget, its target) stays retired
    w.retire(relu_task.task_id, "target speedup reached")
    assert w.seed(dataclasses.replace(seed, source=copy_candidate_source(relu_task, 778))) is SeedOutcome.REFUSED
    assert w.seed(dataclasses.replace(seed, task_id="elsewhere")) is SeedOutcome.REFUSED


async def test_a_seed_that_comes_while_the_loop_runs_is_judged_in_that_run(relu_task):
    w = make_worker(relu_task, proposer=SameProposal(delay_s=0.01), in_flight=1)
    w.max_duplicates = 3
    seed = Candidate.make(task_id=relu_task.task_id, source=copy_candidate_source(relu_task, 779), backend="c",
                          strategy_id="compiler:inductor")
    run = asyncio.ensure_future(w.run())
    await asyncio.sleep(0.005)
    assert w.seed(seed) is SeedOutcome.QUEUED
    assert await asyncio.wait_for(run, 10) == "every task finished"
    assert seed.candidate_id in [c.candidate_id for c, _, _ in w.drain()["records"]]


async def test_checkpoint_restore_and_replay_lose_nothing(relu_task, tmp_path):
    w = make_worker(relu_task, budget=6)
    await w.run()
    first = w.drain()["records"]
    w.checkpoint(tmp_path)
    w2 = make_worker(relu_task, budget=0)
    assert w2.restore(tmp_path) == 1
    assert w2.replay([(c, r) for c, r, _ in first]) == 0  # the checkpoint holds them all
    w3 = make_worker(relu_task, budget=0)  # no checkpoint: rebuilt from the log alone
    assert w3.replay([(c, r) for c, r, _ in first]) == 6
    assert w3.hosts[relu_task.task_id].island.generation == 6
    for c, _, _ in first:
        assert w2.hosts[relu_task.task_id].has_seen(c.candidate_id)
        assert w3.hosts[relu_task.task_id].has_seen(c.candidate_id)


async def test_prompt_outcomes_are_reported(relu_task):
    from actors.prompt_service import PromptService
    service = PromptService(prompt={}, llm={"provider": "none"}, seed=1)
    w = make_worker(relu_task, budget=8, prompts=service)
    await w.run()
    recs = w.drain()["records"]
    assert all(c.strategy_id.startswith("p") for c, _, _ in recs)
    stats = service.stats()["prompts"]
    assert sum(s["reports"] for s in stats) == 8


async def test_migration_between_workers(relu_task):
    a, b = make_worker(relu_task, index=0, budget=12), make_worker(relu_task, index=1, budget=0)
    await a.run()
    out = a.emigrants()[relu_task.task_id]
    assert out, "island 0 is due after 10 generations"
    assert b.immigrate({relu_task.task_id: out}) >= 1
    assert a.emigrants()[relu_task.task_id] == []  # not due again yet


async def test_a_proposal_in_flight_is_waited_for_not_counted_as_a_duplicate(relu_task):
    class Slow(CopyKernelProposer):
        async def propose(self, request):  # the same translation every time
            return Candidate.make(task_id=request.task.task_id, backend="c", origin="template",
                                  source=copy_candidate_source(request.task, 5))

    w = make_worker(relu_task, proposer=Slow(), in_flight=2, budget=3)
    w.max_duplicates = 3
    slow_submit = w.submit

    async def submit(t, c):
        await asyncio.sleep(0.5)  # a long evaluation: the other slot proposes the same meanwhile
        return await slow_submit(t, c)
    w.submit = submit
    await asyncio.wait_for(w.run(), 10)
    assert len(w.drain()["records"]) == 1
    assert "already evaluated" in w.retired[relu_task.task_id]  # retired only after it was judged


async def test_resubmitted_candidates_are_evaluated_first_as_they_were(relu_task):
    first = make_worker(relu_task, index=0, budget=3, in_flight=1)
    await first.run()
    parent = first.drain()["records"][-1][0]
    src = copy_candidate_source(relu_task, 4242)
    orphan = Candidate.make(task_id=relu_task.task_id, source=src, backend="c", island_id=3,
                            parent_ids=(parent.candidate_id, "gone"), generation=9)
    held = first.hosts[relu_task.task_id].island.history[0].candidate
    w = make_worker(relu_task, index=0, budget=2, in_flight=1)
    w.replay([(h.candidate, h.result) for h in first.hosts[relu_task.task_id].island.history])
    assert w.resubmit([orphan, held, dataclasses.replace(orphan, task_id="elsewhere")]) == 2
    await asyncio.wait_for(w.run(), 10)
    out = w.drain()
    cand, result, _ = out["records"][0]
    assert cand.candidate_id == orphan.candidate_id and result.correct
    assert cand.island_id == 0 and cand.parent_ids == (parent.candidate_id,)  # what this island holds
    assert held.candidate_id in out["settled"]  # already held here: settled, not evaluated again
    assert [c.candidate_id for c, _, _ in out["records"]].count(held.candidate_id) == 0


async def test_a_twin_is_kept_in_the_archive_but_not_logged(relu_task):
    from actors.dispatch import TWIN
    w = make_worker(relu_task, in_flight=1)
    ev = FixedCostEvaluator()

    async def submit(t, cand):  # judged for another island before
        return cand, ev.evaluate(task=t, candidate=cand), "ev-0", TWIN + ": judged once, for another island"
    w.submit = submit
    await w.step(relu_task.task_id)
    drained = w.drain()
    assert drained["records"] == [] and len(drained["settled"]) == 1
    assert w.hosts[relu_task.task_id].has_seen(drained["settled"][0])
    assert not w.stop_reason and not w.retired


async def test_a_twin_being_judged_elsewhere_frees_the_slot_and_adds_nothing(relu_task):
    """The dispatcher answers a twin under way at once, without a result: the step ends,
    nothing is held, logged or settled here, the task stays open, and the same code may be
    submitted again later (it is then answered with the settled evaluation)."""
    from actors.dispatch import TWIN_PENDING
    w = make_worker(relu_task, in_flight=1)
    submitted = []

    async def submit(t, cand):
        submitted.append(cand.candidate_id)
        return cand, None, "", TWIN_PENDING + ": being judged for another island"
    w.submit = submit
    await w.step(relu_task.task_id)
    drained = w.drain()
    assert len(submitted) == 1 and drained["records"] == [] and drained["settled"] == []
    assert not w.hosts[relu_task.task_id].has_seen(submitted[0])
    assert submitted[0] not in w.proposed[relu_task.task_id] and w.duplicates.get(relu_task.task_id, 0) == 0
    assert not w.stop_reason and not w.retired


async def test_elites_get_their_hardware_profile_before_they_are_logged(relu_task):
    """Only a child about to enter the archive is profiled; its logged result and the
    archive's copy carry the metrics; the rest are logged as judged."""
    calls = []

    async def profile(task, candidate, result, evaluator):
        calls.append(candidate.candidate_id)
        return {"hardware": {"source": "ncu", "diagnosis": "memory-bound at 50% of the floor"},
                "ncu_dram_throughput_pct": 50.0}

    w = make_worker(relu_task, budget=8, in_flight=1)
    w.profile = profile
    await w.run()
    records = w.drain()["records"]
    profiled = {c.candidate_id for c, r, _ in records if "hardware" in (r.metrics or {})}
    assert profiled == set(calls) and calls
    elites = w.hosts[relu_task.task_id].island.archive.elites()
    assert all(e.result.metrics.get("ncu_dram_throughput_pct") == 50.0 for e in elites)
    assert {e.candidate.candidate_id for e in elites} <= profiled
    assert all(r.correct for c, r, _ in records if c.candidate_id in profiled)


async def test_a_twin_entering_the_archive_carries_the_profile_too(relu_task):
    from actors.dispatch import TWIN
    w = make_worker(relu_task, in_flight=1)
    ev = FixedCostEvaluator()

    async def submit(t, cand):  # judged for another island, which logs it (and had it profiled)
        return cand, ev.evaluate(task=t, candidate=cand), "ev-0", TWIN + ": judged once, for another island"

    async def profile(task, candidate, result, evaluator):
        return {"hardware": {"source": "torch-profiler", "diagnosis": "memory-bound at 50% of the floor"}}
    w.submit, w.profile = submit, profile
    await w.step(relu_task.task_id)
    elites = w.hosts[relu_task.task_id].island.archive.elites()
    assert elites and all(e.result.metrics.get("hardware") for e in elites)
    assert w.drain()["records"] == []


async def test_a_failed_profile_costs_the_elite_nothing(relu_task):
    async def profile(task, candidate, result, evaluator):
        raise RuntimeError("the dispatcher went away")

    w = make_worker(relu_task, budget=3, in_flight=1)
    w.profile = profile
    await w.run()
    records = w.drain()["records"]
    assert len(records) == 3 and all("hardware" not in (r.metrics or {}) for _, r, _ in records)
    assert w.hosts[relu_task.task_id].island.archive.elites()


async def test_islands_start_their_round_robin_on_different_tasks(relu_task):
    """Two islands that start together do not propose for the same tasks at once."""
    tasks = {f"t{k}": dataclasses.replace(relu_task, task_id=f"t{k}") for k in range(6)}

    class Recording(CopyKernelProposer):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.asked: list = []

        async def propose(self, request):
            self.asked.append(request.task.task_id)
            if len(self.asked) >= 3:
                worker.stop("the first wave is what is tested")
            return await super().propose(request)

    async def submit(t, cand):
        return cand, FixedCostEvaluator().evaluate(task=t, candidate=cand), "ev-0", ""

    first = {}
    for index in (0, 1):
        hosts = {t: IslandHost(make_island(island={"count": 2}, island_index=index, task_id=t, seed=0))
                 for t in tasks}
        proposer = Recording(island_index=index)
        worker = IslandWorker(island_index=index, tasks=tasks, hosts=hosts, proposer=proposer, submit=submit,
                              backend="c", in_flight=3)
        await worker.run()
        first[index] = sorted(proposer.asked[:3])
    assert first[0] == ["t0", "t1", "t2"] and first[1] == ["t3", "t4", "t5"]


def several_tasks_worker(relu_task, count, *, proposer=None, budget=None, in_flight=1):
    """A worker over `count` copies of the ReLU task (t0, t1, ...)."""
    tasks = {f"t{k}": dataclasses.replace(relu_task, task_id=f"t{k}") for k in range(count)}
    hosts = {t: IslandHost(make_island(island={"count": 2}, island_index=0, task_id=t, seed=0)) for t in tasks}
    return IslandWorker(island_index=0, tasks=tasks, hosts=hosts, submit=budgeted_submit(budget), backend="c",
                        proposer=proposer or CopyKernelProposer(island_index=0), in_flight=in_flight)


def evaluations_per_task(worker):
    return {t: h.evaluations for t, h in worker.hosts.items()}


async def test_a_resumed_run_serves_first_the_tasks_its_last_sitting_left_behind(relu_task):
    """A resumed run (evaluations replayed from the log) gives its first evaluations to the
    tasks the last sitting had served least, not to the first tasks of the list again."""
    earlier = several_tasks_worker(relu_task, 4, budget=6)
    earlier._pick_task = lambda: "t0" if earlier.hosts["t0"].evaluations < 3 else "t1"  # t0, t1: 3 each
    await earlier.run()
    log = [(c, r) for c, r, _ in earlier.drain()["records"]]
    assert evaluations_per_task(earlier) == {"t0": 3, "t1": 3, "t2": 0, "t3": 0}
    resumed = several_tasks_worker(relu_task, 4, budget=4)
    assert resumed.replay(log) == 6
    await resumed.run()
    assert evaluations_per_task(resumed) == {"t0": 3, "t1": 3, "t2": 2, "t3": 2}


async def test_a_task_whose_proposals_fail_does_not_take_every_turn(relu_task):
    """Steps that add nothing count as service: the island moves on to the other tasks
    rather than asking again and again for the failing one."""
    class FailsOnT0(CopyKernelProposer):
        async def propose(self, request):
            if request.task.task_id == "t0":
                raise RuntimeError("no kernel for t0")
            return await super().propose(request)

    w = several_tasks_worker(relu_task, 3, proposer=FailsOnT0(island_index=0), budget=10)
    w.max_proposer_errors = 3
    assert await asyncio.wait_for(w.run(), 20) == "evaluation budget spent"
    served = evaluations_per_task(w)
    assert served["t0"] == 0 and served["t1"] + served["t2"] == 10 and abs(served["t1"] - served["t2"]) <= 1


async def test_a_task_without_a_correct_kernel_gets_its_first_steps_before_covered_tasks_get_more(relu_task):
    """Breadth first: while t1's candidates are judged wrong, its next steps come before the
    covered task's second one, up to FIRST_KERNEL_STEPS; then the two are served by count."""
    from actors.task_order import FIRST_KERNEL_STEPS
    ev, order = FixedCostEvaluator(), []

    async def submit(t, cand):
        await asyncio.sleep(0.001)
        order.append(t.task_id)
        result = ev.evaluate(task=t, candidate=cand)
        if t.task_id == "t1":
            result = dataclasses.replace(result, stage=int(Stage.VALUE), correct=False, runtime_ms=None,
                                         speedup_eager=None, speedup_compile=None, error="wrong values")
        return cand, result, "ev-0", ""

    w = several_tasks_worker(relu_task, 2)
    w.submit = submit

    async def stop_later():
        while len(order) < FIRST_KERNEL_STEPS + 3:
            await asyncio.sleep(0.001)
        w.stop("enough steps seen")
    await asyncio.gather(w.run(), stop_later())
    assert order[:FIRST_KERNEL_STEPS + 1] == ["t0"] + ["t1"] * FIRST_KERNEL_STEPS
    assert order[FIRST_KERNEL_STEPS + 1] == "t0"  # t1 has had its first steps: served by count again


async def test_tasks_whose_seeds_are_expected_wait_behind_those_with_none(relu_task):
    """The driver says which tasks' compiler seeds it asked for: the island steps the others
    first (a lone convolution, with no seed to come, gets its first template at once), and
    a task goes back among them once its seed failed; a seed handed over (not yet judged)
    leaves its task waiting."""
    w = several_tasks_worker(relu_task, 3, budget=3)
    w.expect_seeds(["t0", "t1", "t9"])  # t9: not a task of this island, ignored
    assert w.seeds_expected == {"t0", "t1"}
    assert w.standing("t0").seed_expected and not w.standing("t2").seed_expected
    w.seed_failed("t0")
    assert not w.standing("t0").seed_expected
    await asyncio.wait_for(w.run(), 20)
    log = [c.task_id for c, _, _ in w.drain()["records"]]
    assert sorted(log[:2]) == ["t0", "t2"]  # the two with no seed expected, t1 last
    assert log[2] == "t1"
    assert w.seed(Candidate.make(task_id="t1", source="class ModelNew: ...", backend="c",
                                 origin="seed")) == SeedOutcome.QUEUED_LOOP_ENDED
    assert w.standing("t1").seed_expected
