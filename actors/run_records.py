"""What the driver writes into the run directory as the run goes: the islands' drained
evaluations, the orphans the dispatcher's ledger hands over (evaluations of island
incarnations that died before handing them over), LLM calls and their cost, and at the
stop the unfinished candidates.

A mixin of `actors.supervisor.Supervisor` (it uses the supervisor's run directory,
evaluation log, progress, islands and dispatcher); kept apart so that each piece of the
driver stays small and says what it does.
"""

from __future__ import annotations

import dataclasses
import logging
import time

from actors.actor_calls import ready_refs, value_or_none
from foundry.store.unfinished import Unfinished, still_unfinished, write_unfinished

log = logging.getLogger("foundry.run")
DRAIN_S = 10.0  # longest a poll waits for the islands' drains


class RunRecords:
    def _note(self, cand, result, *, session: bool) -> None:
        self.by_island.setdefault(cand.island_id, []).append((cand, result))
        self.logged.add((cand.island_id, cand.candidate_id))
        self.progress.record(cand, result, session=session)

    def _drain_all(self, timeout: float | None = DRAIN_S, *, final: bool = False) -> None:
        """Log what the islands evaluated, waiting for their drains together, `timeout`
        seconds at most; a drain not answered yet is collected at the next call (never
        issued twice, so nothing it holds is lost). `final`: the dispatcher's ledger also
        hands over what live islands had not handed over yet (no island is drained again)."""
        until = None if timeout is None else time.monotonic() + timeout
        for i, a in self.islands.items():
            if i not in self._drains:
                self._drains[i] = a.drain.remote()
        if self._calls_ref is None:
            self._calls_ref = self.prompt_actor.drain_calls.remote()
        ready = set(ready_refs([*self._drains.values(), self._calls_ref], timeout))
        claims: dict[str, list] = {}
        for i, ref in list(self._drains.items()):
            if ref not in ready:
                continue
            del self._drains[i]
            out = value_or_none(ref)
            if out is not None:
                claims[out["origin"]] = out["settled"]
                self._take_drained(i, out)
        if self._calls_ref in ready:
            self._add_calls(value_or_none(self._calls_ref) or [])
            self._calls_ref = None
        ledger_s = DRAIN_S if until is None else max(0.5, until - time.monotonic())
        orphans = value_or_none(self.dispatcher.sync_ledger.remote(claims, final), timeout=ledger_s)
        if orphans is None:
            log.warning("the dispatcher's ledger did not answer")
        self._log_orphans(orphans or [], final=final)

    def _take_drained(self, i: int, out: dict) -> None:
        self.peak_rss_mb[f"island-{i}"] = max(self.peak_rss_mb.get(f"island-{i}", 0.0),
                                              float(out.get("peak_rss_mb") or 0.0))
        for cand, result, evaluator in out["records"]:
            self.evlog.append(cand, result, evaluator=evaluator)
            self._note(cand, result, session=True)
        self.settled_ids.update(out["settled"])
        self._add_calls(out["llm_calls"])
        for task_id, why in out["retired"].items():
            if task_id in self.progress.tasks and not self.progress.tasks[task_id].status:
                self.progress.tasks[task_id].status = why

    def _log_orphans(self, orphans: list, *, final: bool = False) -> None:
        """Log what a dead island incarnation (`final`: any island, as the run stops) had
        evaluated but never handed over, with its descriptor cell, and give it to the
        island's new incarnation."""
        by_island: dict[int, list] = {}
        for o in orphans:
            self.settled_ids.add(o.submitted_id or o.candidate.candidate_id)
            cand = o.candidate
            if (cand.island_id, cand.candidate_id) in self.logged:  # the island had dropped it as a twin
                continue
            result = dataclasses.replace(o.result, descriptor=self._cell(cand))
            self.evlog.append(cand, result, evaluator=o.evaluator)
            self._note(cand, result, session=True)
            by_island.setdefault(cand.island_id, []).append((cand, result))
        for i, records in by_island.items():
            whose = "it" if final else "its dead process"
            self.view.say(f"island {i}: logged {len(records)} evaluation(s) {whose} had not handed over")
            if i in self.islands:
                self.islands[i].replay.remote(records)

    def _cell(self, cand) -> tuple:
        from actors.parts import make_island
        key = (cand.island_id, cand.task_id)
        if key not in self._describers:
            self._describers[key] = make_island(island=self.s.raw.get("island") or {},
                                                island_index=cand.island_id, task_id=cand.task_id, seed=self.s.seed)
        return tuple(self._describers[key].describe(cand)[1])

    def _add_calls(self, calls: list) -> None:
        if not calls:
            return
        self.run_dir.append_llm_calls(calls)
        for c in calls:
            cost = float(c.get("cost_usd") or 0.0)
            self.llm_cost_usd += cost
            t = self.progress.tasks.get(str(c.get("task_id") or ""))
            if t is not None:
                t.llm_cost_usd += cost

    def _record_unfinished(self, abandoned: list[Unfinished]) -> None:
        """Keep what this session stopped waiting for, and rewrite the run's unfinished
        file: earlier sessions' records not evaluated since, and these."""
        known = {u.key for u in self.unfinished}
        self.unfinished += [u for u in abandoned if u.key not in known]
        evaluated = self.settled_ids | {cid for _, cid in self.logged}
        write_unfinished(self.run_dir.path, still_unfinished(self.unfinished_before, evaluated_ids=evaluated,
                                                             new=self.unfinished))
        if self.unfinished:
            running = sum(1 for u in self.unfinished if u.evaluator)
            self.view.say(f"KernelFoundry: {len(self.unfinished)} candidate(s) unfinished when the run stopped "
                          f"({running} being evaluated, {len(self.unfinished) - running} queued); recorded in "
                          f"{self.run_dir.unfinished.name}, a resumed run evaluates them again")
