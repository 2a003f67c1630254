"""How the driver stops a run on time: stop the islands, wait for work in flight at most
`run.stop_timeout_s`, then within `FINISH_S` hand over what finished, record what did
not (as unfinished, never as evaluated), save checkpoints and kill every actor still
running. Returns within stop_timeout_s + FINISH_S however long evaluations take.

A mixin of `actors.supervisor.Supervisor`; kept apart so that each piece of the driver
stays small.
"""

from __future__ import annotations

import logging
import time

import ray
from ray.exceptions import RayError

from actors.actor_calls import ready_refs, value_or_none
from actors.run_records import DRAIN_S
from foundry.store.unfinished import Unfinished

log = logging.getLogger("foundry.run")
FINISH_S = 5.0  # after the wait for work in flight: final drain, unfinished, checkpoints, kills


class RunStop:
    def stop(self, reason: str, *, wait: bool = True) -> None:
        """Stop the islands; with `wait`, wait for work in flight (`run.stop_timeout_s` at
        most); then, within `FINISH_S`, log what finished, record what did not as
        unfinished, save checkpoints and kill the actors. Returns within
        stop_timeout_s + FINISH_S (FINISH_S without `wait`) however long evaluations take;
        a second call (Ctrl-C during the wait) finishes what the first left."""
        if self._stopped:
            return
        if self.dispatcher is not None:
            self.dispatcher.close.remote(reason)
        for actor in self.islands.values():
            actor.stop.remote(reason)
        if wait and self.islands:
            self._wait_for_work(until=time.monotonic() + self.s.run.stop_timeout_s)
        self._finish(reason, until=time.monotonic() + FINISH_S)

    def _wait_for_work(self, *, until: float) -> None:
        """Log results as they come until every island's loop has returned and the
        dispatcher is idle (a dead island's evaluations may still run), or `until`."""
        while True:
            self._drain_all(timeout=max(0.0, min(DRAIN_S, until - time.monotonic())))
            self._check_runs(relaunch=False)
            self.view.update()
            left = until - time.monotonic()
            if len(self.finished) == len(self.islands):
                idle = value_or_none(self.dispatcher.idle.remote(), timeout=max(0.0, min(2.0, left)))
                if idle is None or idle:
                    return
            if left <= 0:
                return
            time.sleep(min(self.s.run.poll_s, left))

    def _finish(self, reason: str, *, until: float) -> None:
        def left() -> float:
            return max(0.0, until - time.monotonic())

        abandoned: list[Unfinished] | None = []
        if self.dispatcher is not None:
            self.dispatch_stats = value_or_none(self.dispatcher.stats.remote(), timeout=min(2.0, left())) or {}
            abandoned = value_or_none(self.dispatcher.abandon.remote(reason), timeout=left())
            if abandoned is None:
                log.warning("the dispatcher did not answer: what was still being evaluated is not known")
        if self.islands:
            self._drain_all(timeout=left(), final=True)
        self._record_unfinished(abandoned or [])
        saves = [a.checkpoint.remote() for a in self.islands.values()]
        if self.prompt_actor is not None:
            saves.append(self.prompt_actor.save.remote())
        if len(ready_refs(saves, left())) < len(saves):
            log.warning("final checkpoint incomplete: not every island answered within the stop timeout")
        try:
            self._write_evaluator_infos(timeout=min(2.0, left()))
        except RayError as e:  # the info is a report: the stop goes on without it
            log.warning("evaluators.json not updated at the end: %s", e)
        busy = {u.evaluator for u in abandoned or []} if abandoned is not None else set(self.evaluators)
        closing = [e.close.remote() for name, e in self.evaluators.items() if name not in busy]
        ready_refs(closing, left())
        self._count_immigrants()  # before the islands go: what their last immigrations gave
        self._kill_actors()
        self._stopped = True

    def _kill_actors(self) -> None:
        handles = [*self.islands.values(), *self.evaluators.values(),
                   self.dispatcher, self.prompt_actor, self.proposer_actor]
        for h in handles:
            if h is None:
                continue
            try:
                ray.kill(h, no_restart=True)
            except Exception as e:  # noqa: BLE001 - already gone
                log.debug("kill: %s", e)
