"""The island loop, without Ray: one island index, hosting that island of every task.

`in_flight` slot coroutines each repeat: pick the open task this island has served least
(its evaluations here, replayed ones included, plus its steps that ended without one and
those running now; ties go round-robin), build a request from the task's island (parent,
inspirations, mode), ask the prompt evolver for a prompt, call the proposer, submit the child for evaluation, add it to the
parent's island (this one: a child always lands on its parent's island), report the
outcome to the prompt evolver and put the record in the outbox the driver drains.
Candidates handed over by `resubmit` (unfinished when a previous run stopped) are
submitted first, without proposing. With `profile`, a correct child about to enter its
archive as an elite first gets its kernels' hardware metrics (from the evaluator that
judged it), so the log, the archive and later prompts carry them. `IslandActor` is a
thin Ray shell over this class.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import enum
import json
import logging
import os
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, Mapping

from actors.dispatch import TWIN, TWIN_PENDING
from actors.evaluation import as_logged
from actors.island_host import IslandHost
from actors.task_order import TaskStanding, floor_fraction, next_task
from foundry.store.rundir import task_file_name, write_atomic
from foundry.types import TASK_TOO_LARGE, Candidate, EvalResult, Task

log = logging.getLogger(__name__)
TWIN_PENDING_PAUSE_S = 0.2  # after a twin still being judged elsewhere: no tight loop of proposals
# submit(task, candidate) -> (candidate as evaluated, result | None, evaluator, refusal)
Submit = Callable[[Task, Candidate], Awaitable[tuple]]
# profile(task, candidate, result, evaluator) -> metrics to add to an elite's result, or None
Profile = Callable[[Task, Candidate, EvalResult, str], Awaitable[dict | None]]


class SeedOutcome(enum.Enum):
    """What `IslandWorker.seed` did with a compiler seed."""

    REFUSED = "refused"  # not a task of this island, or one retired for another reason
    QUEUED = "queued"  # the running loop judges it next
    QUEUED_LOOP_ENDED = "queued, loop ended"  # queued, but `run()` had returned: call it again


def peak_rss_mb() -> float:
    """This process's peak resident memory in MB."""
    import resource
    import sys
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


class NoPrompts:
    """Prompt client used when there is no prompt evolver."""

    async def pick(self, **_: Any) -> tuple[str, dict]:
        return "", {}

    async def report(self, **_: Any) -> None:
        return None


class IslandWorker:
    def __init__(self, *, island_index: int, tasks: Mapping[str, Task], hosts: Mapping[str, IslandHost],
                 proposer: Any, submit: Submit, prompts: Any = None, backend: str,
                 in_flight: int = 2, max_duplicates: int = 64,
                 hardware: Mapping[str, Any] | None = None, max_proposer_errors: int = 20,
                 profile: Profile | None = None):
        self.island_index = island_index
        self.tasks, self.hosts = dict(tasks), dict(hosts)
        self.proposer, self.submit, self.prompts = proposer, submit, prompts or NoPrompts()
        self.profile = profile
        self.backend, self.in_flight, self.max_duplicates = backend, in_flight, max_duplicates
        self.hardware = dict(hardware or {})
        self.retired: dict[str, str] = {}
        self.stop_reason = ""
        self.outbox: list[tuple[Candidate, EvalResult, str]] = []
        self.settled: list[str] = []  # ids of submitted children whose outcome is settled here
        self.resubmits: list[Candidate] = []  # to evaluate again before proposing more
        self.llm_calls: list[dict] = []
        self.in_flight_ids: set[str] = set()
        self.proposed: dict[str, set] = {}  # ids of proposals already submitted, per task
        self.duplicates: dict[str, int] = {}
        self.exhausted: set[str] = set()  # retired because the proposer had nothing new
        self.seeds_expected: set[str] = set()  # tasks whose compiler seed was asked for and has not failed
        self._looping = False  # inside run()
        self.proposer_errors = 0
        self.max_proposer_errors = max_proposer_errors
        # the round-robin over tasks starts at a different task on each island: islands
        # that start together would otherwise propose the same first candidates at once,
        # judged once for both while a slot of the other waits: fewer candidates queue for the lanes
        self._next = island_index * max(1, in_flight)
        self._running: collections.Counter = collections.Counter()  # steps under way, per task
        self._fruitless: collections.Counter = collections.Counter()  # steps that added nothing
        self._stopping = False

    # -- control -----------------------------------------------------------
    def stop(self, reason: str = "stopped") -> None:
        self._stopping = True
        self.stop_reason = self.stop_reason or reason

    def retire(self, task_id: str, reason: str) -> None:
        """Stop proposing for `task_id` (the first reason given stays); a compiler seed
        reopens it only when the island itself retired it for lack of new proposals."""
        self.exhausted.discard(task_id)
        self.retired.setdefault(task_id, reason)

    def open_tasks(self) -> list[str]:
        return [t for t in self.tasks if t not in self.retired]

    def drain(self) -> dict:
        out, calls, settled = self.outbox, self.llm_calls, self.settled
        self.outbox, self.llm_calls, self.settled = [], [], []
        return {"records": out, "llm_calls": calls, "settled": settled, "retired": dict(self.retired),
                "stop_reason": self.stop_reason, "in_flight": len(self.in_flight_ids),
                "peak_rss_mb": peak_rss_mb()}

    # -- the loop ----------------------------------------------------------
    async def run(self) -> str:
        """Propose and judge until every task is retired or `stop()`; called again after it
        returned (a compiler seed reopened a task), it goes on from where it was."""
        self._stopping = False
        self.stop_reason = ""
        self._looping = True
        while True:
            slots = [asyncio.ensure_future(self._slot()) for _ in range(self.in_flight)]
            await asyncio.gather(*slots)
            if self._stopping or not self.resubmits:  # a seed queued as the slots ended: go on
                break
        self._looping = False
        if not self.stop_reason:
            self.stop_reason = "every task finished"
        return self.stop_reason

    def served(self, task_id: str) -> int:
        """How much of this island's attention `task_id` had: its evaluations here (a
        resumed run's replayed ones included), its steps that added none (a duplicate, a
        proposer error, a refusal) and its steps under way."""
        return self.hosts[task_id].evaluations + self._fruitless[task_id] + self._running[task_id]

    def standing(self, task_id: str) -> TaskStanding:
        """What the choice of the next task reads of `task_id` on this island."""
        best = self.hosts[task_id].best_correct()
        return TaskStanding(served=self.served(task_id), covered=best is not None,
                            floor_fraction=floor_fraction((best.metrics or {}).get("roofline"))
                            if best is not None else None,
                            stalled=self._fruitless[task_id] > 0, seed_expected=task_id in self.seeds_expected)

    def _pick_task(self) -> str | None:
        """The open task to step next (actors.task_order: tasks without a correct kernel
        first, then by steps weighed by headroom); among equals, the next in round-robin
        order. A task slow to judge, or one a resumed run had reached last, is not left behind."""
        open_ = self.open_tasks()
        if not open_:
            return None
        start = self._next % len(open_)
        self._next += 1
        order = open_[start:] + open_[:start]
        return next_task(order, {t: self.standing(t) for t in order})

    async def _slot(self) -> None:
        while not self._stopping:
            if self.resubmits:
                await self.judge_again(self.resubmits.pop(0))
                continue
            task_id = self._pick_task()
            if task_id is None:
                return
            host = self.hosts[task_id]
            before = host.evaluations
            self._running[task_id] += 1
            try:
                await self.step(task_id)
            finally:
                self._running[task_id] -= 1
            if host.evaluations == before:
                self._fruitless[task_id] += 1

    def expect_seeds(self, task_ids: list[str]) -> None:
        """The driver has asked for these tasks' compiler seeds: unless one fails
        (`seed_failed`), its task waits behind the uncovered tasks with no seed expected
        (actors.task_order), here too where the seed is judged on another island."""
        self.seeds_expected.update(t for t in task_ids if t in self.hosts)

    def seed_failed(self, task_id: str) -> None:
        """`task_id` gets no compiler seed (none could be made, or its evaluator failed)."""
        self.seeds_expected.discard(task_id)

    def seed(self, candidate: Candidate) -> SeedOutcome:
        """Queue a task's compiler seed to judge before anything new is proposed. A task
        retired because its proposer had nothing new opens again: the seed is a parent it
        did not have. Where `run()` had already returned, the outcome says so: the caller
        runs the loop again."""
        task_id = candidate.task_id
        if task_id not in self.hosts:
            return SeedOutcome.REFUSED
        if task_id in self.exhausted:
            self.exhausted.discard(task_id)
            self.retired.pop(task_id, None)
            self.duplicates[task_id] = 0
        if task_id in self.retired:
            return SeedOutcome.REFUSED
        self.resubmits.append(candidate)
        return SeedOutcome.QUEUED if self._looping else SeedOutcome.QUEUED_LOOP_ENDED

    def resubmit(self, candidates: list[Candidate]) -> int:
        """Queue candidates to judge before anything new is proposed: those whose
        evaluation a stopped run did not wait for. Returns how many were queued."""
        queued = [c for c in candidates if c.task_id in self.hosts]
        self.resubmits.extend(queued)
        return len(queued)

    async def judge_again(self, candidate: Candidate) -> None:
        """Submit a queued candidate as it was proposed (on this island; parents this
        island does not hold are dropped from its lineage). One already held here only
        counts as settled; one of a retired task is skipped (it stays unfinished)."""
        task_id, host = candidate.task_id, self.hosts[candidate.task_id]
        cid = candidate.candidate_id
        if task_id in self.retired:
            return
        if host.has_seen(cid) or cid in self.in_flight_ids:
            self.settled.append(cid)
            return
        parents = tuple(p for p in candidate.parent_ids if host.has_seen(p))
        child = dataclasses.replace(candidate, island_id=self.island_index, parent_ids=parents)
        self.proposed.setdefault(task_id, set()).add(cid)  # proposed again later: a duplicate
        await self._judge(task_id, child)

    async def step(self, task_id: str) -> None:
        """One child for `task_id`: propose, evaluate, insert."""
        task, host = self.tasks[task_id], self.hosts[task_id]
        ctx = host.context()
        prompt_id, sections = await self.prompts.pick(task_id=task_id, island_id=self.island_index,
                                                      mode=ctx.mode)
        request = ctx.proposal_request(task=task, backend=self.backend, prompt_id=prompt_id,
                                       prompt_sections=dict(sections or {}), hardware=self.hardware)
        try:
            child = await self.proposer.propose(request)
            self.proposer_errors = 0
        except Exception as e:  # noqa: BLE001 - budgets end the run; other errors are counted
            if type(e).__name__ == "BudgetExhausted":
                self.stop(f"LLM budget spent ({e})")
                return
            self.proposer_errors += 1
            log.warning("island %d: proposer failed on %s: %s", self.island_index, task_id, e)
            if self.proposer_errors >= self.max_proposer_errors:
                self.stop(f"the proposer failed {self.proposer_errors} times in a row ({e})")
            await asyncio.sleep(0.2)
            return
        child = host.adopt(child, generation=request.generation, parent=request.parent,
                           prompt_id=prompt_id)
        cid = child.candidate_id
        proposed = self.proposed.setdefault(task_id, set())
        if cid in self.in_flight_ids:  # e.g. a second translation while the first is judged
            await asyncio.sleep(0.05)
            return
        if host.has_seen(cid) or cid in proposed:
            n = self.duplicates[task_id] = self.duplicates.get(task_id, 0) + 1
            if n >= self.max_duplicates:
                self.retire(task_id, f"{n} proposals in a row were already evaluated")
                self.exhausted.add(task_id)
            await asyncio.sleep(0)
            return
        self.duplicates[task_id] = 0
        proposed.add(cid)  # tuning may turn it into a known candidate: never submit it again
        result = await self._judge(task_id, child)
        if result is None:
            return
        parent_fitness = request.parent_result.fitness if request.parent_result is not None else 0.0
        await self.prompts.report(prompt_id=prompt_id, island_id=self.island_index,
                                  improved=result.fitness > parent_fitness,
                                  fitness_delta=result.fitness - parent_fitness,
                                  correct=bool(result.correct))

    async def _judge(self, task_id: str, child: Candidate) -> EvalResult | None:
        """Submit `child`, insert what comes back and put it in the outbox; None when the
        dispatcher refused it or the candidate (as evaluated) is already held here."""
        task, host, cid = self.tasks[task_id], self.hosts[task_id], child.candidate_id
        self.in_flight_ids.add(cid)
        try:
            evaluated, result, evaluator, refusal = await self.submit(task, child)
        finally:
            self.in_flight_ids.discard(cid)
        scope, _, reason = refusal.partition(": ")
        if scope == TWIN_PENDING:  # being judged for another island: nothing judged here, the slot goes on
            # proposed again later, it is answered with that evaluation; meanwhile other tasks come first
            self.proposed.get(task_id, set()).discard(cid)
            await asyncio.sleep(TWIN_PENDING_PAUSE_S)
            return None
        if scope == TWIN:  # judged for another island before: kept here, logged there
            self.settled.append(cid)
            child = as_logged(submitted=child, evaluated=evaluated)
            if host.has_seen(child.candidate_id):
                return None
            result = await self._profiled(task, child, result, evaluator, host)  # the judge's cached profile
            result, _ = host.add(child, result)
            return result
        if refusal:
            self.stop(reason) if scope == "all" else self.retire(task_id, reason)
            return None
        self.settled.append(cid)
        child = as_logged(submitted=child, evaluated=evaluated)  # tuned: the best params found
        if host.has_seen(child.candidate_id):  # arrived meanwhile (a migrant, a twin, a tuned twin)
            self.duplicates[task_id] = self.duplicates.get(task_id, 0) + 1
            return None
        result = await self._profiled(task, child, result, evaluator, host)  # before it is logged or held
        result, _ = host.add(child, result)
        self.outbox.append((child, result, evaluator))
        if TASK_TOO_LARGE in result.flags:  # no candidate of it fits this judge: propose no more
            self.retire(task_id, (result.error or TASK_TOO_LARGE).splitlines()[0][:300])
        return result

    async def _profiled(self, task: Task, child: Candidate, result: EvalResult, evaluator: str,
                        host: IslandHost) -> EvalResult:
        """`result` with the hardware profile of `child` where it is about to enter the
        archive as an elite (and profiles are asked for); as it was otherwise."""
        if self.profile is None or result is None or not result.correct or not host.would_enter(child, result):
            return result
        try:
            hardware = await self.profile(task, child, result, evaluator)
        except Exception as e:  # noqa: BLE001 - a profile is an extra: the elite goes in without it
            log.warning("island %d: no hardware profile for %s: %s", self.island_index, child.candidate_id, e)
            return result
        return dataclasses.replace(result, metrics={**(result.metrics or {}), **hardware}) if hardware else result

    # -- migration ---------------------------------------------------------
    def emigrants(self) -> dict[str, list]:
        return {t: h.emigrants() for t, h in self.hosts.items()}

    def immigrate(self, by_task: Mapping[str, list]) -> int:
        return sum(self.hosts[t].immigrate(list(m)) for t, m in by_task.items() if t in self.hosts)

    # -- checkpoints and replay -------------------------------------------
    def checkpoint(self, directory: str | Path) -> None:
        directory = Path(directory)
        for task_id, host in self.hosts.items():
            host.save(directory / (task_file_name(task_id) + ".ckpt"))
        write_atomic(directory / "worker.json", json.dumps(
            {"island_index": self.island_index, "saved_at": time.time(), "pid": os.getpid()},
            sort_keys=True))

    def restore(self, directory: str | Path) -> int:
        """Load what `checkpoint` wrote (missing files are skipped); returns islands loaded."""
        directory = Path(directory)
        loaded = 0
        for task_id, host in self.hosts.items():
            path = directory / (task_file_name(task_id) + ".ckpt")
            if path.exists():
                host.load(path)
                loaded += 1
        return loaded

    def replay(self, records: list[tuple[Candidate, EvalResult]]) -> int:
        """Insert logged evaluations the islands do not hold yet (after a restart or resume)."""
        added = 0
        for cand, result in records:
            host = self.hosts.get(cand.task_id)
            if host is not None and host.replay(cand, result):
                added += 1
        return added
