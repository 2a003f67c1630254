"""The driver's side of the runtime: start the actors, drain results into the run
directory, restart islands that died, migrate, enforce budgets, stop cleanly.

No call to an actor blocks the driver past a deadline: the watch loop's calls end at
the wall-time budget at the latest (a drain that has not answered is collected at the
next poll), and `stop` waits for work in flight at most `run.stop_timeout_s`, then takes
at most `FINISH_S` more to hand over what finished, record what did not (as unfinished,
never as evaluated), save checkpoints and kill every actor that is still running.

The pieces: `actors.run_records` (what goes into the run directory), `actors.island_restarts`
(islands that died), `actors.run_stop` (the stop); this module starts the run and watches it.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayError

from actors.actor_calls import ready_refs, value_or_none
from actors.cluster_care import ClusterCare
from actors.dispatcher_actor import DispatcherActor
from actors.evaluation import tuner_config
from actors.evaluator_actor import EvaluatorActor, evaluator_options
from actors.island_actor import IslandActor
from actors.island_restarts import IslandRestarts
from actors.prompt_actor import PromptEvolverActor
from actors.proposer_actor import ProposerActor
from actors.run_records import DRAIN_S, RunRecords
from actors.run_stop import FINISH_S, RunStop
from actors.seeding import SeedRequests, seeds_at_once
from actors.twins import KEPT as TWINS_KEPT
from foundry.store.rundir import write_atomic
from foundry.store.unfinished import Unfinished

__all__ = ["FINISH_S", "Supervisor"]
log = logging.getLogger("foundry.run")
DEVICE_FACTS_S = 120.0  # longest the start waits for an evaluator to describe its device (LLM runs)


def _llm_enabled(llm: dict) -> bool:
    from foundry.llm import LLMConfig
    return LLMConfig.from_config(dict(llm)).enabled


class Supervisor(RunRecords, IslandRestarts, RunStop, ClusterCare):
    def __init__(self, *, settings: Any, run_dir: Any, tasks: list, backend: str, gpus: int,
                 prior: list, evlog: Any, progress: Any, view: Any,
                 unfinished: list[Unfinished] | tuple = (), started: float | None = None):
        """`started`: the monotonic time the wall-time budget counts from (default: now)."""
        self.s, self.run_dir, self.tasks = settings, run_dir, {t.task_id: t for t in tasks}
        self.backend, self.gpus, self.evlog = backend, gpus, evlog
        self.progress, self.view = progress, view
        self.started = time.monotonic() if started is None else started
        self.by_island: dict[int, list] = {}
        self.logged: set[tuple[int, str]] = set()  # (island, candidate id) in the run log
        self._describers: dict[tuple[int, str], Any] = {}
        self.retired: dict[str, str] = {}
        self.llm_cost_usd = sum(float(c.get("cost_usd") or 0.0) for c in run_dir.read_llm_calls())
        self.prior = [rec for rec in prior if rec.candidate.task_id in self.tasks]
        for rec in self.prior:
            self._note(rec.candidate, rec.result, session=False)
        self.islands: dict[int, Any] = {}
        self.runs: dict[int, Any] = {}
        self.finished: dict[int, str] = {}
        self.peak_rss_mb: dict[str, float] = {}
        self.dispatch_stats: dict = {}  # the dispatcher's counts at the stop (run.json's session "dispatch")
        self.relaunches: dict[int, int] = {}
        self.unfinished_before = list(unfinished)  # what earlier sessions did not finish
        self.unfinished: list[Unfinished] = []  # what this session stopped waiting for
        self.settled_ids: set[str] = set()  # ids of candidates whose evaluation settled this session
        self.evaluators: dict[str, Any] = {}
        self._evaluator_infos: dict[str, dict] = {}  # what each evaluator last said about itself
        self.dispatcher = self.prompt_actor = self.proposer_actor = None
        self._drains: dict[int, Any] = {}  # island -> a drain call not collected yet
        self._calls_ref: Any = None  # the prompt actor's drain of LLM calls, not collected yet
        self._stopped = False
        # each task's compiler seed, asked for at the start, a few at a time per evaluator
        self.seeds = SeedRequests(per_evaluator=seeds_at_once(settings.run.seeds_per_evaluator, gpu=bool(gpus),
                                                                gpu_evaluators=max(1, int(gpus))))

    # -- start ------------------------------------------------------------------
    def _start_actors(self) -> None:
        s, raw = self.s, self.s.raw
        # the dispatcher, the prompt evolver and the template engine stay on the driver's
        # node (they cost no GPU, and a lost worker node must not take them); islands are
        # spread over the nodes; an evaluator is pinned to each GPU of every node
        count = int((raw.get("island") or {}).get("count", 1))
        self._survey_cluster(count if s.ray.spread_islands else 0)
        here = self._bookkeeping_strategy()
        self.lanes = lanes = s.ray.slots(gpu=bool(self.gpus))
        eval_config = {**(raw.get("evaluator") or {})}
        if not s.run.evaluator_impl:  # the runtime places evaluators, so it sets their device
            eval_config["device"] = "cuda" if self.gpus else "cpu"
        self._evaluator_args = dict(
            eval_config=eval_config, impl=s.run.evaluator_impl,
            tuning=tuner_config(raw.get("templates") or {}) if s.run.tune else None,
            lanes=lanes, backend=self.backend, seed_timeout_s=s.run.seed_timeout_s, ncu_share=s.run.ncu_share,
            covered=sorted({rec.candidate.task_id for rec in self.prior if rec.result.correct}))
        self.evaluators = {slot.name: self._new_evaluator(slot)
                           for slot in self._evaluator_slots(gpus=self.gpus, cpu_evaluators=s.ray.cpu_evaluators)}
        done = self.progress.evaluations
        budget = None if s.budget.evaluations is None else max(0, s.budget.evaluations - done)
        spent = {t: p.evaluations for t, p in self.progress.tasks.items()}
        self.dispatcher = DispatcherActor.options(scheduling_strategy=here).remote(
            budget=budget, budget_per_key=s.budget.evaluations_per_task, spent_per_key=spent,
            # earlier sessions' verdicts: the same code proposed again is not judged again
            judged=[(rec.candidate, rec.result, rec.evaluator) for rec in self.prior[-TWINS_KEPT:]],
            tasks=sorted(self.tasks))
        ray.get(self.dispatcher.add_evaluators.remote(self.evaluators, lanes))
        self.prompt_actor = PromptEvolverActor.options(max_restarts=s.ray.max_restarts,
                                                       scheduling_strategy=here).remote(
            prompt=raw.get("prompt") or {}, llm=raw.get("llm") or {}, seed=self.s.seed,
            state_path=str(self.run_dir.checkpoints / "prompts.json"))
        settings = {"island": raw.get("island") or {}, "llm": raw.get("llm") or {},
                    "templates": raw.get("templates") or {}, "backend": self.backend,
                    "in_flight": s.run.in_flight_per_island, "max_duplicates": s.run.max_duplicates,
                    "checkpoint_every_s": s.run.checkpoint_every_s, "seed": s.seed,
                    "proposer_impl": s.run.proposer_impl,
                    # profiles are of GPU kernels: a CPU run's islands do not ask for any
                    "profile_elites": s.run.profile_elites and bool(self.gpus)}
        if _llm_enabled(raw.get("llm") or {}):  # the prompts' hardware section
            settings["hardware"] = self._device_facts()
        settings["proposer_actor"] = None
        if not s.run.proposer_impl and not _llm_enabled(raw.get("llm") or {}):
            self.proposer_actor = ProposerActor.options(scheduling_strategy=here).remote(
                llm=raw.get("llm") or {}, templates=raw.get("templates") or {}, seed=s.seed)
            settings["proposer_actor"] = self.proposer_actor
        self._island_settings = settings
        for i in range(count):
            self.islands[i] = self._new_island(i, self.island_node.get(i) if s.ray.spread_islands else None)
        self._check_targets()
        again = self._to_evaluate_again()
        if again:
            self.view.say(f"resuming: {sum(map(len, again.values()))} candidate(s) unfinished when the "
                          "run stopped are evaluated again first")
        if s.run.compiler_seeds and not s.run.evaluator_impl:
            # before the islands run, so that each knows from its first pick which seeds are expected
            self.seeds.start(tasks=list(self.tasks.values()), evaluators=list(self.evaluators.values()),
                             islands=self.islands)
        for i, actor in self.islands.items():
            if again.get(i):
                actor.resubmit.remote(again[i])
            self._launch(i)
        self._write_evaluator_infos()  # the islands propose meanwhile; their work queues

    def _new_island(self, i: int, node_id: str | None) -> Any:
        """Start island i's actor on `node_id` (None: the driver's node); it loads its checkpoint."""
        strategy = self._bookkeeping_strategy() if node_id is None else self._node_strategy(node_id)
        return IslandActor.options(max_restarts=self.s.ray.max_restarts, max_task_retries=0,
                                   scheduling_strategy=strategy).remote(
            island_index=i, tasks=self.tasks, settings=self._island_settings, dispatcher=self.dispatcher,
            prompt_actor=self.prompt_actor, checkpoint_dir=str(self.run_dir.island_checkpoint_dir(i)))

    def _new_evaluator(self, slot) -> Any:
        """Start the evaluator of an `actors.placement.EvaluatorSlot`."""
        s = self.s
        opts = evaluator_options(gpu=slot.gpu, cpus=s.ray.evaluator_cpus, max_restarts=s.ray.max_restarts,
                                 slots=self.lanes, seeds=self.seeds.per_evaluator)
        return EvaluatorActor.options(**self._placed(slot, opts)).remote(name=slot.name, **self._evaluator_args)

    def _device_facts(self) -> dict:
        """The first evaluator's device as the prompts describe it, waiting for its start
        (at most DEVICE_FACTS_S, never past the budget); {} when it does not answer."""
        first = next(iter(self.evaluators.values()), None)
        facts = value_or_none(first.device_facts.remote(), timeout=self._left(DEVICE_FACTS_S)) if first is not None else None
        if facts is None:
            log.warning("the prompts go without a hardware section: the first evaluator did not describe its device")
        return dict(facts or {})

    def _write_evaluator_infos(self, *, timeout: float | None = None) -> None:
        """evaluators.json: what each evaluator says about itself (written at the start and
        again at the end, with its lanes' busy time and device-gate figures); one that does
        not answer in `timeout` (default: by the wall-time budget) keeps what it said before,
        or is listed as not started."""
        refs = {name: e.info.remote() for name, e in self.evaluators.items()}
        ready = ready_refs(list(refs.values()), self._left(None) if timeout is None else timeout)
        # one that answered with an error could not start (a bad evaluator config): raise it
        infos = {name: ray.get(ref) if ref in ready else self._evaluator_infos.get(name, {"name": name, "started": False})
                 for name, ref in refs.items()}
        self._evaluator_infos = infos = {name: self._with_node(info) for name, info in infos.items()}
        rows = [*infos.values(), *self.lost_evaluators.values()]
        write_atomic(self.run_dir.path / "evaluators.json", json.dumps(rows, indent=2))

    def _to_evaluate_again(self) -> dict[int, list]:
        """Earlier sessions' unfinished candidates of this run's tasks not logged since, by
        island (an island index beyond this run's islands wraps around)."""
        out: dict[int, list] = {}
        count = len(self.islands)
        for u in self.unfinished_before:
            c = u.candidate
            if c.task_id in self.tasks and (c.island_id, c.candidate_id) not in self.logged and count:
                out.setdefault(c.island_id % count, []).append(c)
        return out

    def _deadline(self) -> float | None:
        b = self.s.budget.wall_time_s
        return None if b is None else self.started + b

    def _left(self, cap: float | None) -> float | None:
        """Seconds a call may wait now: at most `cap` (None: no cap), and never past the
        wall-time budget."""
        deadline = self._deadline()
        if deadline is None:
            return cap
        left = max(0.0, deadline - time.monotonic())
        return left if cap is None else min(cap, left)

    # -- watch ------------------------------------------------------------------
    def start_and_watch(self) -> str:
        self._start_actors()
        last_migration = time.monotonic()
        while True:
            time.sleep(self.s.run.poll_s)
            self._watch_nodes()
            self._drain_all(timeout=self._left(DRAIN_S))
            for i in self.seeds.collect(islands=self.islands, say=self.view.say):
                self.finished.pop(i, None)  # its loop had returned: the seed reopened a task
                self.runs[i] = self.islands[i].run.remote()
            self._check_runs()
            reason = self._check_budgets()
            if reason:
                return reason
            if len(self.finished) == len(self.islands) and not self.seeds.outstanding():
                reasons = sorted(set(self.finished.values()))
                return "; ".join(reasons)
            if self.s.run.migrate_every_s and time.monotonic() - last_migration >= self.s.run.migrate_every_s:
                self._migrate()
                last_migration = time.monotonic()
            self.view.update()

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
        self._count_immigrants()
        order = sorted(self.islands)
        if len(order) < 2:
            return
        island_cfg = self.s.raw.get("island") or {}
        topology = Topology(kind=str(island_cfg.get("topology", "ring")), count=len(order))
        try:
            calls = [self.islands[i].emigrants.remote() for i in order] + [self.islands[i].node.remote() for i in order]
            answers = ray.get(calls, timeout=self._left(10.0))
        except (RayError, GetTimeoutError):  # an island is dead or moving (its node lost): next round
            return
        outgoing, nodes = answers[:len(order)], dict(zip(order, answers[len(order):]))
        self.island_node.update(nodes)  # where each island runs now (a restart may have moved it)
        for i, by_task in zip(order, outgoing):
            by_task = {t: m for t, m in by_task.items() if m}
            if by_task:
                for target in topology.targets(source=i):
                    entered = self.islands[target].immigrate.remote(by_task)
                    self._note_migration(i, target, sum(map(len, by_task.values())), nodes, entered)
