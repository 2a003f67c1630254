"""`DispatcherActor`: the one place candidates are queued and balanced over evaluators
(an async actor over `actors.dispatch.Balancer`). It also files every finished
evaluation of an island in a `Ledger` until the driver has claimed it, so an island
killed mid-run loses no evaluated candidate. When the run stops waiting, `abandon` hands
the driver what was still queued or being evaluated, as `Unfinished` records. A candidate
that another island already had judged (the same code for the same task, among the last
judged, earlier sessions' verdicts included when the run resumes: `actors.twins`) is
answered with that evaluation, not judged again; one being judged now is answered at
once, without a result, so that no island waits on another's."""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable

import ray
from ray.exceptions import ActorUnschedulableError, RayActorError

from actors.dispatch import TWIN, TWIN_PENDING, Balancer, EvaluationLost, Refused, WorkerLost, WorkerUnavailable
from actors.evaluation import as_logged
from actors.ledger import Ledger, Settled
from actors.twins import Twins
from foundry.store.unfinished import Unfinished
from foundry.types import Candidate, EvalResult, Stage, Task


def evaluator_call(handle, tuning_open: Callable[[], bool]):
    """The balancer's call to one evaluator actor. After a call that lost the actor, the
    next one first asks whether the actor is back (`__ray_ready__`): while it is not, the
    call raises WorkerUnavailable, which charges the item no loss."""
    lost = False

    async def call(payload):
        nonlocal lost
        task, candidate, _origin = payload
        if lost:
            try:
                await handle.__ray_ready__.remote()
            except (RayActorError, ActorUnschedulableError) as e:
                raise WorkerUnavailable(f"{type(e).__name__}, still restarting") from None
            lost = False
        try:  # whether to tune is settled as the evaluator takes the candidate, not as it was queued
            return await handle.evaluate.remote(task, candidate, tune=tuning_open())
        except (RayActorError, ActorUnschedulableError) as e:  # the second: its node is gone
            lost = True
            raise WorkerLost(type(e).__name__) from None
    return call


def _failed(candidate: Candidate, error: str) -> EvalResult:
    return EvalResult(candidate_id=candidate.candidate_id, task_id=candidate.task_id,
                      stage=int(Stage.RUNTIME), correct=False, error=error[:500])


def _outcome(candidate: Candidate, value: Any, error: BaseException | None) -> tuple:
    """(candidate as evaluated, result, evaluator name) for a settled item: a candidate that
    lost its evaluator too often, or met an evaluator error, gets a runtime-stage result."""
    if error is None:
        return value
    if isinstance(error, EvaluationLost):
        return candidate, _failed(candidate, str(error)), ""
    return candidate, _failed(candidate, f"evaluator error: {type(error).__name__}: {error}"), ""


@ray.remote(num_cpus=0)
class DispatcherActor:
    def __init__(self, *, budget: int | None, budget_per_key: int | None,
                 spent_per_key: dict | None = None, max_attempts: int = 3, retry_delay_s: float = 0.5,
                 judged: Iterable[tuple[Candidate, EvalResult, str]] = (), tasks: Iterable[str] = ()):
        """`judged`: earlier sessions' verdicts (candidate, result, evaluator), oldest first.
        `tasks`: the run's task ids; until each has a verdict (or was closed), candidates
        are judged untuned while other work waits in the queue (breadth first)."""
        self.ledger = Ledger()
        self.balancer = Balancer(budget=budget, budget_per_key=budget_per_key,
                                 spent_per_key=dict(spent_per_key or {}),
                                 max_attempts=max_attempts, retry_delay_s=retry_delay_s,
                                 on_settle=self._file, payload_id=lambda p: p[1].candidate_id)
        self.twins = Twins()
        self.twins.prime(judged)
        self._evaluators: dict[str, Any] = {}  # name -> handle
        self.tasks = frozenset(tasks)
        self._closed_tasks: set[str] = set()
        self._breadth_reached = False

    def tuning_open(self) -> bool:
        """Whether a candidate taken now is tuned: once every task of the run has a
        verdict or was closed, or, before that, while no other candidate waits (tuning
        then delays no task's first kernel)."""
        if not self._breadth_reached:
            self._breadth_reached = all(self.twins.reached(t) or t in self._closed_tasks for t in self.tasks)
        return self._breadth_reached or self.balancer.queue.qsize() == 0

    def _file(self, payload: Any, value: Any, error: BaseException | None) -> None:
        task, candidate, origin = payload
        if not origin:
            return
        evaluated, result, name = _outcome(candidate, value, error)
        self.ledger.file(origin=origin, submitted_id=candidate.candidate_id, settled=Settled(
            island_index=candidate.island_id, candidate=as_logged(submitted=candidate, evaluated=evaluated),
            result=result, evaluator=name, submitted_id=candidate.candidate_id))

    async def add_evaluators(self, handles: dict, slots: int = 1) -> None:
        for name, handle in handles.items():
            self.balancer.add_worker(name, evaluator_call(handle, self.tuning_open), slots=slots)
            self._evaluators[name] = handle

    async def remove_evaluators(self, names: list[str]) -> int:
        """Stop sending work to these evaluators (their node is gone); what they were
        evaluating goes back to the queue. Returns how many candidates went back."""
        back = 0
        for name in names:
            back += self.balancer.remove_worker(name)
            self._evaluators.pop(name, None)
        return back

    async def profile(self, evaluator: str, task: Task, candidate: Candidate, result: EvalResult) -> dict | None:
        """Hardware metrics of an elite from the evaluator that judged it (its device);
        None where that evaluator is gone or gives none."""
        handle = self._evaluators.get(evaluator)
        if handle is None:
            return None
        try:
            return await handle.profile_elite.remote(task, candidate, result)
        except Exception:  # noqa: BLE001 - a profile is an extra: its failure costs the elite nothing
            return None

    async def submit(self, task: Task, candidate: Candidate, origin: str = "") -> tuple:
        """Returns (candidate as evaluated, result, evaluator name, refusal). A refusal
        ("all: ..."/"key: ...") comes with no result. `origin` names the submitting island
        incarnation; with one, the outcome is also filed in the ledger.

        A candidate already judged for this task (another island proposed the same code) is
        not judged twice: this call returns that evaluation's result with the refusal
        "twin: ..." (the result is the other island's record; the submitter keeps it in its
        archive but logs nothing). Only a judge's verdict is reused: not a refusal, nor the
        failure an evaluator's loss or bug gives. One being judged right now is not waited
        for: the call returns at once, without a result, with the refusal "twin_pending:
        ..." (a tuned screen can run for minutes, and a waiting submitter's island would
        hold one of its slots idle all that time)."""
        if origin:
            self.ledger.seen(origin=origin, island_index=candidate.island_id)
        key = (task.task_id, candidate.candidate_id)
        settled = self.twins.settled(*key, tuning_open=self.tuning_open())
        if settled is not None:
            return (*settled, TWIN + ": judged once, for another island or an earlier session")
        if self.twins.judging(*key):
            return candidate, None, "", TWIN_PENDING + ": being judged for another island"
        self.twins.start(*key)
        verdict = None
        try:
            outcome, verdict = await self._submit(task, candidate, origin)
            return outcome
        finally:
            self.twins.finish(*key, verdict)

    async def _submit(self, task: Task, candidate: Candidate, origin: str) -> tuple:
        """(the submitter's answer, the judge's verdict or None where there was none)."""
        try:
            # breadth first: a task's first correct kernel (or its compiler seed) goes ahead
            # of the tuning of tasks that have one
            first = candidate.origin == "seed" or not self.twins.covered(task.task_id)
            value = await self.balancer.submit((task, candidate, origin), key=task.task_id, first=first)
        except Refused as r:
            return (candidate, None, "", f"{r.scope}: {r.reason}"), None
        except Exception as e:  # noqa: BLE001 - an evaluator bug must not stop the island
            return (*_outcome(candidate, None, e), ""), None
        return (*value, ""), tuple(value)

    def mark_dead(self, island_index: int) -> int:
        return self.ledger.mark_dead(island_index=island_index)

    def sync_ledger(self, claims: dict[str, list[str]], final: bool = False) -> list[Settled]:
        """Apply the driver's claims ({origin: submitted ids it drained}), then hand over
        the orphans (finished evaluations of dead island incarnations; `final`: of every
        incarnation, as the driver drains no island again)."""
        for origin, ids in claims.items():
            self.ledger.claim(origin=origin, submitted_ids=ids)
        return self.ledger.take_orphans(every_origin=final)

    def abandon(self, reason: str) -> list[Unfinished]:
        """Stop waiting for what is queued or being evaluated: its submitters are refused,
        its results, should they still come, are dropped. Returns every candidate
        abandoned so far (the same list again on a second call)."""
        now = time.time()
        return [Unfinished(candidate=a.payload[1], evaluator=a.worker, running_s=a.running_s, reason=reason,
                           stopped_at=now) for a in self.balancer.abandon(reason)]

    def idle(self) -> bool:
        """Nothing queued and nothing being evaluated."""
        stats = self.balancer.stats()
        return stats["queued"] == 0 and stats["busy"] == 0

    def close(self, reason: str, key: str | None = None) -> None:
        if key is not None:
            self._closed_tasks.add(key)
        self.balancer.close(reason, key)

    def stats(self) -> dict[str, Any]:
        return {**self.balancer.stats(), "ledger_open": len(self.ledger), "breadth_reached": self._breadth_reached}
