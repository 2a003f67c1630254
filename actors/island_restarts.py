"""The driver's care of island actors: launch an island's loop (after replaying what the
run log holds for it), note the loops that returned, and restart an island that died or
whose loop failed, from its checkpoint, at most a few times.

A mixin of `actors.supervisor.Supervisor` (it uses the supervisor's islands, runs and
dispatcher); kept apart so that each piece of the driver stays small.
"""

from __future__ import annotations

import logging
import time

import ray
from ray.exceptions import ActorUnavailableError, ActorUnschedulableError, GetTimeoutError, RayActorError

log = logging.getLogger("foundry.run")
RESTART_WAIT_S = 60.0  # the longest the driver waits for a dead island's actor to come back
RESTART_POLL_S = 0.2


class IslandRestarts:
    def _launch(self, i: int) -> None:
        actor = self.islands[i]
        actor.replay.remote(self.by_island.get(i, []))
        for task_id, reason in self.retired.items():
            actor.retire.remote(task_id, reason)
        self.runs[i] = actor.run.remote()

    def _check_runs(self, *, relaunch: bool = True) -> None:
        """Note the islands whose loop returned; restart those that died or failed (when
        stopping, `relaunch` False: only note them)."""
        pending = [r for i, r in self.runs.items() if i not in self.finished]
        if not pending:
            return
        ready, _ = ray.wait(pending, num_returns=len(pending), timeout=0)
        for i, ref in list(self.runs.items()):
            if ref not in ready or i in self.finished:
                continue
            try:
                self.finished[i] = ray.get(ref)
            except (RayActorError, ActorUnschedulableError) as e:  # the second: its node is gone
                self._watch_nodes(now=True)  # its node may be gone: then it was moved, and runs again
                if self.runs.get(i) is not ref:
                    continue
                if not relaunch:  # what it had in flight comes from the ledger at the final drain
                    self._drains.pop(i, None)
                    self.finished[i] = f"island {i} died while the run stopped"
                    continue
                self._mark_dead(i)
                self.view.say(f"island {i}: actor died ({type(e).__name__}); restarting from its checkpoint")
                self._relaunch(i)
            except Exception as e:  # noqa: BLE001 - a bug in an island's loop: say it, go on
                first = str(e).strip().splitlines()[-1][:300] if str(e).strip() else type(e).__name__
                if not relaunch:
                    self.finished[i] = f"island {i}: its loop failed ({first})"
                    continue
                self.view.say(f"island {i}: its loop failed ({first}); starting it again")
                self._relaunch(i)

    def _mark_dead(self, i: int) -> None:
        """Before the island runs again: what its dead incarnation had in flight or had
        not handed over becomes orphans the driver logs (the dispatcher kept them)."""
        self._drains.pop(i, None)  # a drain of the dead incarnation never answers
        try:
            ray.get(self.dispatcher.mark_dead.remote(i), timeout=max(1.0, self._left(30.0)))
        except (RayActorError, GetTimeoutError) as e:
            log.warning("island %d: its evaluations in flight could not be recovered: %s", i, e)

    def _relaunch(self, i: int) -> None:
        self.relaunches[i] = self.relaunches.get(i, 0) + 1
        if self.relaunches[i] > max(3, self.s.ray.max_restarts):
            self.finished[i] = f"island {i} failed {self.relaunches[i]} times"
            return
        self._await_restart(i)
        try:
            self._launch(i)
        except RayActorError:
            self.finished[i] = f"island {i}: its actor could not be restarted"

    def _await_restart(self, i: int) -> None:
        """Wait (at most RESTART_WAIT_S, never past the wall-time budget) until island `i`'s
        actor answers again after its restart. A loop launched on it before then fails at
        once with ActorUnavailableError, which reads as another death: on a loaded 2-core
        machine one death of an island was so reported three times over, each counted
        toward the island's restart limit."""
        deadline = time.monotonic() + max(0.5, self._left(RESTART_WAIT_S))
        while True:
            try:
                ray.get(self.islands[i].__ray_ready__.remote(), timeout=max(0.1, deadline - time.monotonic()))
                return
            except ActorUnavailableError:  # still restarting: ask again shortly
                if time.monotonic() + RESTART_POLL_S >= deadline:
                    break
                time.sleep(RESTART_POLL_S)
            except (RayActorError, ActorUnschedulableError, GetTimeoutError):  # dead, its node gone, or slow:
                break  # the launch says which (a moved island runs again from _check_runs)
        log.warning("island %d: its actor did not answer within the wait; launching it anyway", i)
