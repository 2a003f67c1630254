"""The driver's side of the runtime: start the actors, drain results into the run
directory, restart islands that died, migrate, enforce budgets, stop cleanly."""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError

from actors.dispatcher_actor import DispatcherActor
from actors.evaluation import tuner_config
from actors.evaluator_actor import EvaluatorActor, evaluator_options
from actors.island_actor import IslandActor
from actors.prompt_actor import PromptEvolverActor
from actors.proposer_actor import ProposerActor

log = logging.getLogger("foundry.run")


def _llm_enabled(llm: dict) -> bool:
    from foundry.llm import LLMConfig
    return LLMConfig.from_config(dict(llm)).enabled


class Supervisor:
    def __init__(self, *, settings: Any, run_dir: Any, tasks: list, backend: str, gpus: int,
                 prior: list, evlog: Any, progress: Any, view: Any):
        self.s, self.run_dir, self.tasks = settings, run_dir, {t.task_id: t for t in tasks}
        self.backend, self.gpus, self.evlog = backend, gpus, evlog
        self.progress, self.view = progress, view
        self.started = time.monotonic()
        self.by_island: dict[int, list] = {}
        self.logged: set[tuple[int, str]] = set()  # (island, candidate id) in the run log
        self._describers: dict[tuple[int, str], Any] = {}
        self.retired: dict[str, str] = {}
        self.llm_cost_usd = sum(float(c.get("cost_usd") or 0.0) for c in run_dir.read_llm_calls())
        for rec in prior:
            if rec.candidate.task_id in self.tasks:
                self._note(rec.candidate, rec.result, session=False)
        self.islands: dict[int, Any] = {}
        self.runs: dict[int, Any] = {}
        self.finished: dict[int, str] = {}
        self.peak_rss_mb: dict[str, float] = {}
        self.relaunches: dict[int, int] = {}

    def _note(self, cand, result, *, session: bool) -> None:
        self.by_island.setdefault(cand.island_id, []).append((cand, result))
        self.logged.add((cand.island_id, cand.candidate_id))
        self.progress.record(cand, result, session=session)

    # -- start ------------------------------------------------------------------
    def _start_actors(self) -> None:
        s, raw = self.s, self.s.raw
        # islands, the dispatcher and the prompt actor stay on the driver's node (cheap CPU
        # actors, and their checkpoints land in the run directory there); evaluators go
        # wherever the GPUs are
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        here = NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=True)
        n_eval = self.gpus if self.gpus else s.ray.cpu_evaluators
        opts = evaluator_options(gpu=bool(self.gpus), cpus=s.ray.evaluator_cpus,
                                 max_restarts=s.ray.max_restarts, slots=s.ray.slots_per_evaluator)
        eval_config = {**(raw.get("evaluator") or {})}
        tuning = tuner_config(raw.get("templates") or {}) if s.run.tune else None
        if not s.run.evaluator_impl:  # the runtime places evaluators, so it sets their device
            eval_config["device"] = "cuda" if self.gpus else "cpu"
        self.evaluators = {f"evaluator-{k}": EvaluatorActor.options(**opts).remote(
            name=f"evaluator-{k}", eval_config=eval_config, impl=s.run.evaluator_impl, tuning=tuning)
            for k in range(n_eval)}
        done = self.progress.evaluations
        budget = None if s.budget.evaluations is None else max(0, s.budget.evaluations - done)
        spent = {t: p.evaluations for t, p in self.progress.tasks.items()}
        self.dispatcher = DispatcherActor.options(scheduling_strategy=here).remote(
            budget=budget, budget_per_key=s.budget.evaluations_per_task,
                                                 spent_per_key=spent)
        ray.get(self.dispatcher.add_evaluators.remote(self.evaluators, s.ray.slots_per_evaluator))
        infos = ray.get([e.info.remote() for e in self.evaluators.values()])
        from foundry.store.rundir import write_atomic
        import json
        write_atomic(self.run_dir.path / "evaluators.json", json.dumps(infos, indent=2))
        self.prompt_actor = PromptEvolverActor.options(max_restarts=s.ray.max_restarts,
                                                       scheduling_strategy=here).remote(
            prompt=raw.get("prompt") or {}, llm=raw.get("llm") or {}, seed=self.s.seed,
            state_path=str(self.run_dir.checkpoints / "prompts.json"))
        settings = {"island": raw.get("island") or {}, "llm": raw.get("llm") or {},
                    "templates": raw.get("templates") or {}, "backend": self.backend,
                    "in_flight": s.run.in_flight_per_island, "max_duplicates": s.run.max_duplicates,
                    "checkpoint_every_s": s.run.checkpoint_every_s, "seed": s.seed,
                    "proposer_impl": s.run.proposer_impl}
        settings["proposer_actor"] = None
        if not s.run.proposer_impl and not _llm_enabled(raw.get("llm") or {}):
            self.proposer_actor = ProposerActor.options(scheduling_strategy=here).remote(
                llm=raw.get("llm") or {}, templates=raw.get("templates") or {}, seed=s.seed)
            settings["proposer_actor"] = self.proposer_actor
        count = int((raw.get("island") or {}).get("count", 1))
        for i in range(count):
            self.islands[i] = IslandActor.options(max_restarts=s.ray.max_restarts, max_task_retries=0,
                                                  scheduling_strategy=here).remote(
                island_index=i, tasks=self.tasks, settings=settings, dispatcher=self.dispatcher,
                prompt_actor=self.prompt_actor, checkpoint_dir=str(self.run_dir.island_checkpoint_dir(i)))
        self._check_targets()
        for i, actor in self.islands.items():
            self._launch(i)

    def _launch(self, i: int) -> None:
        actor = self.islands[i]
        actor.replay.remote(self.by_island.get(i, []))
        for task_id, reason in self.retired.items():
            actor.retire.remote(task_id, reason)
        self.runs[i] = actor.run.remote()

    # -- watch ------------------------------------------------------------------
    def start_and_watch(self) -> str:
        self._start_actors()
        last_migration = time.monotonic()
        while True:
            time.sleep(self.s.run.poll_s)
            self._drain_all()
            self._check_runs()
            reason = self._check_budgets()
            if reason:
                return reason
            if len(self.finished) == len(self.islands):
                reasons = sorted(set(self.finished.values()))
                return "; ".join(reasons)
            if self.s.run.migrate_every_s and time.monotonic() - last_migration >= self.s.run.migrate_every_s:
                self._migrate()
                last_migration = time.monotonic()
            self.view.update()

    def _drain_all(self, timeout: float = 10.0) -> None:
        refs = {i: a.drain.remote() for i, a in self.islands.items()}
        claims: dict[str, list] = {}
        for i, ref in refs.items():
            try:
                out = ray.get(ref, timeout=timeout)
            except (RayActorError, GetTimeoutError):
                continue
            self.peak_rss_mb[f"island-{i}"] = max(self.peak_rss_mb.get(f"island-{i}", 0.0),
                                                  float(out.get("peak_rss_mb") or 0.0))
            for cand, result, evaluator in out["records"]:
                self.evlog.append(cand, result, evaluator=evaluator)
                self._note(cand, result, session=True)
            claims[out["origin"]] = out["settled"]
            self._add_calls(out["llm_calls"])
            for task_id, why in out["retired"].items():
                if task_id in self.progress.tasks and not self.progress.tasks[task_id].status:
                    self.progress.tasks[task_id].status = why
        try:
            orphans = ray.get(self.dispatcher.sync_ledger.remote(claims), timeout=timeout)
        except (RayActorError, GetTimeoutError) as e:
            log.warning("the dispatcher's ledger did not answer: %s", e)
            orphans = []
        self._log_orphans(orphans)
        try:
            self._add_calls(ray.get(self.prompt_actor.drain_calls.remote(), timeout=timeout))
        except (RayActorError, GetTimeoutError):
            pass

    def _log_orphans(self, orphans: list) -> None:
        """Log what a dead island incarnation had evaluated but never handed over, with its
        descriptor cell, and give it to the island's new incarnation."""
        by_island: dict[int, list] = {}
        for o in orphans:
            cand = o.candidate
            if (cand.island_id, cand.candidate_id) in self.logged:  # the island had dropped it as a twin
                continue
            result = dataclasses.replace(o.result, descriptor=self._cell(cand))
            self.evlog.append(cand, result, evaluator=o.evaluator)
            self._note(cand, result, session=True)
            by_island.setdefault(cand.island_id, []).append((cand, result))
        for i, records in by_island.items():
            self.view.say(f"island {i}: logged {len(records)} evaluation(s) its dead process had not handed over")
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

    def _check_runs(self) -> None:
        pending = [r for i, r in self.runs.items() if i not in self.finished]
        if not pending:
            return
        ready, _ = ray.wait(pending, num_returns=len(pending), timeout=0)
        for i, ref in list(self.runs.items()):
            if ref not in ready or i in self.finished:
                continue
            try:
                self.finished[i] = ray.get(ref)
            except RayActorError as e:
                self.view.say(f"island {i}: actor died ({type(e).__name__}); restarting from its checkpoint")
                self._mark_dead(i)
                self._relaunch(i)
            except Exception as e:  # noqa: BLE001 - a bug in an island's loop: say it, go on
                first = str(e).strip().splitlines()[-1][:300] if str(e).strip() else type(e).__name__
                self.view.say(f"island {i}: its loop failed ({first}); starting it again")
                self._relaunch(i)

    def _mark_dead(self, i: int) -> None:
        """Before the island runs again: what its dead incarnation had in flight or had
        not handed over becomes orphans the driver logs (the dispatcher kept them)."""
        try:
            ray.get(self.dispatcher.mark_dead.remote(i), timeout=30)
        except (RayActorError, GetTimeoutError) as e:
            log.warning("island %d: its evaluations in flight could not be recovered: %s", i, e)

    def _relaunch(self, i: int) -> None:
        self.relaunches[i] = self.relaunches.get(i, 0) + 1
        if self.relaunches[i] > max(3, self.s.ray.max_restarts):
            self.finished[i] = f"island {i} failed {self.relaunches[i]} times"
            return
        try:
            self._launch(i)
        except RayActorError:
            self.finished[i] = f"island {i}: its actor could not be restarted"

    def _check_targets(self) -> None:
        target = self.s.budget.target_speedup
        if target is None:
            return
        for task_id, t in self.progress.tasks.items():
            if task_id not in self.retired and t.best_eager is not None and t.best_eager >= target:
                why = f"target speedup {target:g}x reached"
                self.retired[task_id] = why
                t.status = why
                self.dispatcher.close.remote(why, task_id)
                for actor in self.islands.values():
                    actor.retire.remote(task_id, why)

    def _check_budgets(self) -> str:
        b = self.s.budget
        self._check_targets()
        if b.target_speedup is not None and len(self.retired) == len(self.tasks):
            return f"every task reached the target speedup {b.target_speedup:g}x"
        if b.wall_time_s is not None and time.monotonic() - self.started >= b.wall_time_s:
            return f"wall-time budget of {b.wall_time_s:g} s spent"
        if b.llm_cost_usd is not None and self.llm_cost_usd >= b.llm_cost_usd:
            return f"LLM cost budget of ${b.llm_cost_usd:g} spent"
        return ""

    def _migrate(self) -> None:
        """Each island actor hands over the emigrants of its islands that are due; they
        go to the target islands of the configured topology (ring by default)."""
        from islands import Topology
        order = sorted(self.islands)
        if len(order) < 2:
            return
        island_cfg = self.s.raw.get("island") or {}
        topology = Topology(kind=str(island_cfg.get("topology", "ring")), count=len(order))
        try:
            outgoing = ray.get([self.islands[i].emigrants.remote() for i in order], timeout=10)
        except (RayActorError, GetTimeoutError):
            return
        for i, by_task in zip(order, outgoing):
            by_task = {t: m for t, m in by_task.items() if m}
            if by_task:
                for target in topology.targets(source=i):
                    self.islands[target].immigrate.remote(by_task)

    # -- stop -------------------------------------------------------------------
    def stop(self, reason: str, *, wait: bool = True) -> None:
        if not self.islands:
            return
        self.dispatcher.close.remote(reason)
        for actor in self.islands.values():
            actor.stop.remote(reason)
        pending = [r for i, r in self.runs.items() if i not in self.finished]
        deadline = time.monotonic() + self.s.run.stop_timeout_s
        if wait and pending:
            ray.wait(pending, num_returns=len(pending), timeout=self.s.run.stop_timeout_s)
        while wait and time.monotonic() < deadline:  # a dead island's evaluations still running
            try:
                if ray.get(self.dispatcher.idle.remote(), timeout=10):
                    break
            except (RayActorError, GetTimeoutError):
                break
            time.sleep(0.1)
        self._drain_all()
        try:
            ray.get([a.checkpoint.remote() for a in self.islands.values()]
                    + [self.prompt_actor.save.remote()], timeout=30)
        except (RayActorError, GetTimeoutError) as e:
            log.warning("final checkpoint incomplete: %s", e)
        try:
            ray.get([e.close.remote() for e in self.evaluators.values()], timeout=30)
        except (RayActorError, GetTimeoutError):
            pass
