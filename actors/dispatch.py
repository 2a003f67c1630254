"""Balancing candidates over evaluators (pure asyncio; `DispatcherActor` wraps it).

Work goes into one queue; every evaluator has `slots` worker coroutines that take the
next item, so a fast or idle evaluator takes more work. An item submitted `first` (the
dispatcher's: a candidate of a task without a correct kernel yet, or a compiler seed) is
taken before every item that is not, each kind in the order submitted, so that a task's
first kernel does not wait behind the tuning of tasks that have one. When a call raises
`WorkerLost` (the evaluator died or is restarting), the item goes back to the queue for
any evaluator and the worker waits before it calls again; after `max_attempts` losses of
one item it fails with `EvaluationLost`. `WorkerUnavailable` (the evaluator is known to be
restarting and took no work) counts no loss against the item, and the worker's wait
doubles with each in a row, up to UNAVAILABLE_WAIT_S: on a loaded machine a restart takes
seconds, and items charged a loss for each call the restarting evaluator refused failed
as lost three times without having run. A worker whose evaluator lost `give_up_after`
calls in a row stops. The evaluation budget (total and per key) is counted here, at
submission, so it is exact however many islands submit. `on_settle(payload, result,
error)` is called once per item when it settles, in the worker, whether or not its
submitter still waits.

`abandon(reason)` ends the wait for everything queued or being evaluated (when a run
stops before its evaluations end): each such item's submitter gets `Refused`, the item
never settles (`on_settle` is not called for it, whenever its call returns), and it is
returned as `Abandoned` (which worker had it, for how long) so the caller can record it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

log = logging.getLogger(__name__)
TWIN = "twin"  # the refusal scope of a candidate already judged for another island (its result comes along)
TWIN_PENDING = "twin_pending"  # ... of one being judged for another island now (no result; nothing waits)
UNAVAILABLE_WAIT_S = 1.0  # the longest a worker waits between calls to an evaluator still restarting


class WorkerLost(Exception):
    """The evaluator died or is restarting; the item is re-queued."""


class WorkerUnavailable(WorkerLost):
    """The evaluator is still restarting and took no work: the item is re-queued without
    a loss counted against it (it did not cost the evaluator), and the worker waits longer
    each time before it calls again."""


class EvaluationLost(RuntimeError):
    """An item was lost `max_attempts` times (it may crash every evaluator)."""


class Refused(Exception):
    """The dispatcher takes no more work for this key (`scope` "key") or at all ("all")."""

    def __init__(self, reason: str, *, scope: str):
        super().__init__(reason)
        self.reason, self.scope = reason, scope


@dataclass
class _Item:
    payload: Any
    future: asyncio.Future
    order: tuple = (1, 0)  # (0 for an item submitted first, else 1; submission number): the queue's order
    attempts: int = 0
    worker: str = ""  # the worker evaluating it now ("" while queued)
    started: float | None = None  # monotonic time its current call began
    abandoned: bool = False


@dataclass(frozen=True)
class Abandoned:
    """An item still queued or being evaluated when the balancer gave up waiting."""

    payload: Any
    worker: str  # "" when it was still queued
    running_s: float | None  # how long its evaluation had run (None: still queued)


@dataclass
class WorkerStats:
    done: int = 0
    lost: int = 0
    consecutive_lost: int = 0
    alive: bool = True
    busy: int = 0
    # slot-seconds its slots waited with nothing queued (waits that ended: a slot still
    # waiting is not counted); a lane the islands do not keep fed shows here
    starved_s: float = 0.0


@dataclass
class Balancer:
    max_attempts: int = 3
    retry_delay_s: float = 0.5
    give_up_after: int = 40
    budget: int | None = None  # evaluations still allowed (None: no limit)
    budget_per_key: int | None = None
    spent_per_key: dict = field(default_factory=dict)
    workers: dict = field(default_factory=dict)
    on_settle: Callable[[Any, Any, BaseException | None], None] | None = None
    payload_id: Callable[[Any], str] | None = None  # names a payload in `requeued_from`
    requeued: int = 0
    requeued_from: dict = field(default_factory=dict)  # worker -> ids of the items it lost (payload_id)
    _queue: asyncio.PriorityQueue | None = None
    _tasks: list = field(default_factory=list)
    _worker_tasks: dict = field(default_factory=dict)  # worker -> its slot coroutines
    _closed: dict = field(default_factory=dict)  # key -> reason; "" key: everything
    _submitted: int = 0
    _live: dict = field(default_factory=dict)  # id(item) -> item, queued or being evaluated
    _abandoned: list = field(default_factory=list)  # Abandoned, in the order given up

    @property
    def queue(self) -> asyncio.PriorityQueue:
        """(item.order, item) pairs: the items submitted first, then the others, each in order."""
        if self._queue is None:
            self._queue = asyncio.PriorityQueue()
        return self._queue

    def _queue_item(self, item: _Item) -> None:
        self.queue.put_nowait((item.order, item))

    def _next_queued(self) -> _Item:
        return self.queue.get_nowait()[1]

    def add_worker(self, name: str, call: Callable[[Any], Awaitable[Any]], *, slots: int = 1) -> None:
        self.workers[name] = WorkerStats()
        for _ in range(slots):
            task = asyncio.ensure_future(self._work(name, call))
            self._tasks.append(task)
            self._worker_tasks.setdefault(name, []).append(task)

    def remove_worker(self, name: str) -> int:
        """Stop using a worker (its node is gone): its slots stop, and what it was
        evaluating goes back to the queue for the others. Returns how many items it had."""
        stats = self.workers.get(name)
        if stats is None or not stats.alive:
            return 0
        stats.alive = False
        held = stats.busy
        for task in self._worker_tasks.pop(name, []):
            task.cancel()
        self._fail_if_no_worker()
        return held

    def close(self, reason: str, key: str | None = None) -> None:
        """Refuse further submissions (for `key`, or all when None)."""
        self._closed["" if key is None else key] = reason

    def _admit(self, key: str) -> None:
        if "" in self._closed:
            raise Refused(self._closed[""], scope="all")
        if key in self._closed:
            raise Refused(self._closed[key], scope="key")
        if self.budget is not None and self._submitted >= self.budget:
            self.close("evaluation budget spent")
            raise Refused("evaluation budget spent", scope="all")
        spent = self.spent_per_key.get(key, 0)
        if self.budget_per_key is not None and spent >= self.budget_per_key:
            self.close("evaluation budget of the task spent", key)
            raise Refused(self._closed[key], scope="key")
        if not any(w.alive for w in self.workers.values()):
            raise Refused("no evaluator is alive", scope="all")
        self._submitted += 1
        self.spent_per_key[key] = spent + 1

    async def submit(self, payload: Any, *, key: str = "", first: bool = False) -> Any:
        """Queue `payload` (`first`: ahead of every item not submitted first) and return what
        the evaluator call returned for it."""
        self._admit(key)
        item = _Item(payload, asyncio.get_running_loop().create_future(),
                     order=(0 if first else 1, self._submitted))
        self._live[id(item)] = item
        self._queue_item(item)
        return await item.future

    def abandon(self, reason: str) -> list[Abandoned]:
        """Refuse further work and stop waiting for anything queued or being evaluated;
        returns every item abandoned so far (calling it again returns them again)."""
        self.close(reason)
        now = time.monotonic()
        for item in list(self._live.values()):
            item.abandoned = True
            running = None if item.started is None else now - item.started
            self._abandoned.append(Abandoned(payload=item.payload, worker=item.worker, running_s=running))
            if not item.future.done():
                item.future.set_exception(Refused(reason, scope="all"))
        self._live.clear()
        while not self.queue.empty():
            self._next_queued()
        return list(self._abandoned)

    async def _work(self, name: str, call: Callable[[Any], Awaitable[Any]]) -> None:
        stats = self.workers[name]
        while stats.alive:
            waiting_since = time.monotonic()
            _, item = await self.queue.get()
            stats.starved_s += time.monotonic() - waiting_since
            if item.abandoned:
                continue
            stats.busy += 1
            item.worker, item.started = name, time.monotonic()
            try:
                result = await call(item.payload)
            except asyncio.CancelledError:  # the worker was removed: the item goes to another
                stats.busy -= 1
                self._lost_by(name, item)
                item.worker, item.started = "", None
                if not item.abandoned:
                    self.requeued += 1
                    self._queue_item(item)
                raise
            except WorkerLost as e:
                stats.busy -= 1
                stats.lost += 1
                stats.consecutive_lost += 1
                self._lost_by(name, item)
                item.worker, item.started = "", None
                if item.abandoned:
                    continue
                item.attempts += 0 if isinstance(e, WorkerUnavailable) else 1
                if item.attempts >= self.max_attempts:
                    self._settle(item, None, EvaluationLost(
                        f"the evaluator was lost {item.attempts} times on this candidate ({e})"))
                else:
                    self.requeued += 1
                    self._queue_item(item)
                if stats.consecutive_lost >= self.give_up_after:
                    stats.alive = False
                    self._fail_if_no_worker()
                    return
                wait_s = self.retry_delay_s
                if isinstance(e, WorkerUnavailable):
                    wait_s = min(wait_s * 2 ** min(stats.consecutive_lost, 16), UNAVAILABLE_WAIT_S)
                await asyncio.sleep(wait_s)
                continue
            except Exception as e:  # noqa: BLE001 - the evaluator's own error: pass it to the submitter
                stats.busy -= 1
                self._settle(item, None, e)
                continue
            stats.busy -= 1
            stats.done += 1
            stats.consecutive_lost = 0
            self._settle(item, result, None)

    def _lost_by(self, name: str, item: _Item) -> None:
        if self.payload_id is not None:
            self.requeued_from.setdefault(name, []).append(self.payload_id(item.payload))

    def _settle(self, item: _Item, result: Any, error: BaseException | None) -> None:
        if item.abandoned:  # already handed back by `abandon`
            return
        self._live.pop(id(item), None)
        if self.on_settle is not None:
            try:
                self.on_settle(item.payload, result, error)
            except Exception:  # noqa: BLE001 - bookkeeping must not stop the worker
                log.exception("on_settle failed")
        if item.future.done():  # the submitter went away
            return
        if error is None:
            item.future.set_result(result)
        else:
            item.future.set_exception(error)

    def _fail_if_no_worker(self) -> None:
        if any(w.alive for w in self.workers.values()):
            return
        while not self.queue.empty():
            self._settle(self._next_queued(), None, EvaluationLost("no evaluator is alive"))

    def stats(self) -> dict:
        return {"submitted": self._submitted, "queued": self.queue.qsize(), "requeued": self.requeued,
                "requeued_from": {n: list(ids) for n, ids in self.requeued_from.items()},
                "abandoned": len(self._abandoned),
                "busy": sum(w.busy for w in self.workers.values()),
                "workers": {n: vars(w).copy() for n, w in self.workers.items()}}

    async def aclose(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
