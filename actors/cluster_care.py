"""The driver's view of the cluster while a run goes on: where each actor was placed
(`actors.placement`), nodes lost and added (`actors.node_watch`), and migrations between
islands with the nodes they ran on.

A node lost: its evaluators leave the dispatcher, which puts what they were evaluating
back in the queue for the others; its islands die with it and `actors.island_restarts`
restarts them on another node from their checkpoints and the run log; the event (node,
time, evaluators, candidates sent back, islands) goes into run.json and the report. A
node added to a GPU run gets one evaluator per GPU. What this records ends up in the
session's "cluster" entry of run.json (`cluster_summary`).

A mixin of `actors.supervisor.Supervisor`; kept apart so that each piece of the driver
stays small.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actors.actor_calls import value_or_none
from actors.node_watch import LOST, NodeEvent, NodeWatch
from actors.placement import ClusterNode, EvaluatorSlot, gpu_evaluator_slots, island_nodes, nodes_from_ray

log = logging.getLogger("foundry.run")
NODE_POLL_S = 1.0  # how often the driver asks Ray which nodes are alive


class ClusterCare:
    def _survey_cluster(self, island_count: int) -> None:
        """At the start: the nodes, the driver's node, where the islands go."""
        self.driver_node = ray.get_runtime_context().get_node_id()
        self.nodes: dict[str, ClusterNode] = {n.node_id: n for n in nodes_from_ray(ray.nodes())}
        self.node_watch = NodeWatch(self.nodes.values())
        self._nodes_seen_at = time.monotonic()
        self.island_node: dict[int, str] = island_nodes(island_count, self.nodes.values(),
                                                         driver_node=self.driver_node)
        self.evaluator_nodes: dict[str, str | None] = {}  # evaluator -> node id (None: not known yet)
        self.pinned: set[str] = set()  # evaluators pinned to their node (a lost node takes them)
        self.lost_evaluators: dict[str, dict] = {}  # evaluator -> its last info, with the loss
        self.node_notes: list[dict] = []  # nodes lost and added, in order
        self.migrations: dict[tuple[int, int], dict] = {}  # (from island, to island) -> counts and nodes
        self._immigrations: list[tuple[tuple[int, int], Any]] = []  # immigrate calls not counted yet

    def _bookkeeping_strategy(self) -> NodeAffinitySchedulingStrategy:
        """Dispatcher, prompt evolver, template engine: on the driver's node, always."""
        return NodeAffinitySchedulingStrategy(node_id=self.driver_node, soft=False)

    def _node_strategy(self, node_id: str) -> NodeAffinitySchedulingStrategy:
        """Pinned to the node (a soft affinity was seen not to hold: Ray put most actors
        on one node); an island whose node is lost is started again elsewhere by
        `_node_lost`."""
        return NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)

    def _evaluator_slots(self, *, gpus: int, cpu_evaluators: int) -> list[EvaluatorSlot]:
        if not gpus:
            from actors.placement import cpu_evaluator_slots
            return cpu_evaluator_slots(cpu_evaluators)
        return gpu_evaluator_slots(self.nodes.values(), limit=gpus)

    def _placed(self, slot: EvaluatorSlot, options: dict) -> dict:
        """An evaluator's actor options with its node (GPU evaluators are pinned)."""
        self.evaluator_nodes[slot.name] = slot.node_id
        if slot.node_id is None:
            return options
        self.pinned.add(slot.name)
        return {**options, "scheduling_strategy": NodeAffinitySchedulingStrategy(node_id=slot.node_id, soft=False)}

    # -- while the run goes on --------------------------------------------------
    def _watch_nodes(self, *, now: bool = False) -> None:
        """Look at the cluster's nodes (every NODE_POLL_S at most, unless `now`)."""
        if not hasattr(self, "node_watch") or (not now and time.monotonic() - self._nodes_seen_at < NODE_POLL_S):
            return
        self._nodes_seen_at = time.monotonic()
        try:
            rows = ray.nodes()
        except Exception as e:  # noqa: BLE001 - the head's GCS did not answer: look again later
            log.warning("could not list the cluster's nodes: %s", e)
            return
        current = nodes_from_ray(rows)
        self.nodes.update({n.node_id: n for n in current})
        for event in self.node_watch.update(current, at_s=time.monotonic() - self.started):
            if event.kind == LOST:
                self._node_lost(event)
            else:
                self._node_added(event)

    def _node_lost(self, event: NodeEvent) -> None:
        node = event.node
        names = [n for n, where in self.evaluator_nodes.items() if where == node.node_id and n in self.pinned
                 and n in self.evaluators]  # an unpinned (CPU) evaluator is restarted by Ray elsewhere
        back = 0
        if names:
            back = value_or_none(self.dispatcher.remove_evaluators.remote(names), timeout=self._left(10.0)) or 0
        for name in names:
            handle = self.evaluators.pop(name)
            try:
                ray.kill(handle, no_restart=True)
            except Exception as e:  # noqa: BLE001 - gone with its node
                log.debug("kill %s: %s", name, e)
            info = dict(self._evaluator_infos.get(name) or {"name": name, "started": False})
            info["lost"] = f"node {node.label} lost {event.at_s:.1f} s into the run"
            self.lost_evaluators[name] = info
        islands = sorted(i for i, where in self.island_node.items() if where == node.node_id and i in self.islands)
        moved = {i: self._move_island(i) for i in islands}
        self.node_notes.append({"event": "lost", "node": node.as_row(), "at_s": round(event.at_s, 1),
                                "evaluators": names, "requeued": back, "islands": islands,
                                "islands_moved_to": {str(i): self._label(n) for i, n in moved.items()}})
        self.view.say(f"node {node.label} lost {event.at_s:.0f} s into the run: "
                      f"{len(names)} evaluator(s) gone ({', '.join(names) or 'none'}), {back} candidate(s) "
                      f"they were evaluating back in the queue; island(s) {islands or 'none'} started "
                      "again on another node from their checkpoints")
        self._write_evaluator_infos(timeout=self._left(2.0))

    def _move_island(self, i: int) -> str:
        """Island i's node is gone: what its incarnation had in flight or had not handed
        over becomes orphans for the driver (the dispatcher's ledger), and a new actor on
        another alive node (the driver's first) loads its checkpoint, gets the run log's
        records beyond it and runs again. Returns the new node's id."""
        alive = [n for n in self.node_watch.alive.values()]
        others = [n.node_id for n in alive if n.node_id != self.island_node.get(i)]
        spread = island_nodes(i + 1, [n for n in alive if n.node_id in others], driver_node=self.driver_node)
        target = spread.get(i, self.driver_node)
        try:
            ray.kill(self.islands[i], no_restart=True)
        except Exception as e:  # noqa: BLE001 - gone with its node
            log.debug("kill island %d: %s", i, e)
        self._mark_dead(i)
        self.islands[i] = self._new_island(i, target)
        self.island_node[i] = target
        self.finished.pop(i, None)
        self._launch(i)
        return target

    def _node_added(self, event: NodeEvent) -> None:
        node = event.node
        handles: dict[str, Any] = {}
        if self.gpus and node.gpus:
            cap = self.s.ray.max_gpu_evaluators
            limit = None if cap is None else max(0, cap - len(self.evaluators))
            start = len(self.evaluator_nodes)
            handles = {slot.name: self._new_evaluator(slot)
                       for slot in gpu_evaluator_slots([node], start=start, limit=limit)}
        if handles:
            self.evaluators.update(handles)
            self.dispatcher.add_evaluators.remote(handles, self.lanes)
        self.node_notes.append({"event": "added", "node": node.as_row(), "at_s": round(event.at_s, 1),
                                "evaluators": sorted(handles)})
        self.view.say(f"node {node.label} joined {event.at_s:.0f} s into the run: "
                      f"{len(handles)} evaluator(s) started there")

    def _note_migration(self, source: int, target: int, sent: int, nodes: dict[int, str], entered: Any) -> None:
        """`sent` elites went from island `source` to `target` (`nodes`: island -> node);
        `entered`: the call that says how many of them filled or improved a cell there."""
        entry = self.migrations.setdefault((source, target), {
            "from_island": source, "to_island": target, "rounds": 0, "elites": 0, "entered": 0, "node_pairs": []})
        entry["rounds"] += 1
        entry["elites"] += sent
        self._immigrations.append(((source, target), entered))
        pair = [self._label(nodes.get(source)), self._label(nodes.get(target))]
        if pair not in entry["node_pairs"]:
            entry["node_pairs"].append(pair)

    def _count_immigrants(self, timeout: float = 0.0) -> None:
        """Add what the immigrate calls answered so far to the migrations' "entered"."""
        waiting = []
        for key, ref in getattr(self, "_immigrations", []):
            ready = ray.wait([ref], timeout=timeout)[0]
            if not ready:
                waiting.append((key, ref))
                continue
            self.migrations[key]["entered"] += int(value_or_none(ref) or 0)
        self._immigrations = waiting

    def _label(self, node_id: str | None) -> str:
        node = self.nodes.get(node_id or "")
        return node.label if node is not None else str(node_id)

    def _with_node(self, info: dict) -> dict:
        """An evaluator's info with its node's address and whether it is the head."""
        node = self.nodes.get(str(info.get("node_id") or self.evaluator_nodes.get(info.get("name", "")) or ""))
        if node is None:
            return info
        if self.evaluator_nodes.get(info.get("name", "")) is None and info.get("name"):
            self.evaluator_nodes[info["name"]] = node.node_id
        return {**info, "node": node.label, "node_address": node.address, "head_node": node.head}

    def cluster_summary(self) -> dict:
        """The session's "cluster" entry of run.json ({} before the start surveyed it)."""
        if not hasattr(self, "node_watch"):
            return {}
        self._count_immigrants()
        return {"driver_node": self._label(self.driver_node),
                "nodes": [n.as_row() for n in self.nodes.values()],
                "evaluators": {name: self._label(node) for name, node in self.evaluator_nodes.items()},
                "islands": {str(i): self._label(node) for i, node in self.island_node.items()},
                "events": list(self.node_notes),
                "migrations": [self.migrations[k] for k in sorted(self.migrations)]}
