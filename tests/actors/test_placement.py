"""Placement on a cluster and node changes, on plain records (no Ray): evaluators per GPU
of every alive node, islands round-robin from the driver's node, nodes lost and added,
and a balancer worker removed with work in hand."""

from __future__ import annotations

import asyncio

from actors.dispatch import Balancer
from actors.node_watch import ADDED, LOST, NodeWatch
from actors.placement import ClusterNode, gpu_evaluator_slots, island_nodes, nodes_from_ray


def _row(node_id, port, *, gpus=0, head=False, alive=True):
    resources = {"CPU": 2.0, **({"GPU": float(gpus)} if gpus else {}), **({"node:__internal_head__": 1.0} if head else {})}
    return {"NodeID": node_id, "NodeManagerAddress": "10.0.0.1", "NodeManagerPort": port, "Resources": resources,
            "Alive": alive}


def test_nodes_evaluator_slots_and_island_spread():
    nodes = nodes_from_ray([_row("w2", 30, gpus=2), _row("h", 10, head=True), _row("w1", 20, gpus=2),
                            _row("gone", 40, gpus=8, alive=False)])
    assert [n.node_id for n in nodes] == ["h", "w1", "w2", "gone"] and nodes[0].head and nodes[1].label.startswith("10.0.0.1:20")
    slots = gpu_evaluator_slots(nodes)
    assert [(s.name, s.node_id) for s in slots] == [("evaluator-0", "w1"), ("evaluator-1", "w2"),
                                                    ("evaluator-2", "w1"), ("evaluator-3", "w2")]
    # fewer evaluators than GPUs: spread over the nodes
    assert [s.node_id for s in gpu_evaluator_slots(nodes, limit=2)] == ["w1", "w2"]
    # a node that joins: numbering goes on, nodes already served get nothing more
    late = ClusterNode(node_id="w3", address="10.0.0.1:50", gpus=1, cpus=2, head=False, alive=True)
    more = gpu_evaluator_slots([*nodes, late], start=4, taken={"w1": 2, "w2": 2})
    assert [(s.name, s.node_id) for s in more] == [("evaluator-4", "w3")]
    assert island_nodes(4, nodes, driver_node="h") == {0: "h", 1: "w1", 2: "w2", 3: "h"}


def test_node_watch_reports_lost_and_added_nodes():
    a = ClusterNode("a", "x:1", 0, 1, True, True)
    b = ClusterNode("b", "x:2", 2, 1, False, True)
    c = ClusterNode("c", "x:3", 2, 1, False, True)
    watch = NodeWatch([a, b])
    assert watch.update([a, b], at_s=1.0) == []
    events = watch.update([a, ClusterNode("b", "x:2", 2, 1, False, False), c], at_s=2.0)
    assert [(e.kind, e.node.node_id, e.at_s) for e in events] == [(LOST, "b", 2.0), (ADDED, "c", 2.0)]
    assert [e.kind for e in watch.update([a], at_s=3.0)] == [LOST]


async def test_a_removed_worker_hands_its_items_to_the_others():
    b = Balancer(payload_id=str)
    started = asyncio.Event()

    async def stuck(x):  # its node is gone: the call never answers
        started.set()
        await asyncio.sleep(3600)

    async def ok(x):
        return x * 2

    b.add_worker("lost", stuck)
    job = asyncio.ensure_future(b.submit(21))
    await asyncio.wait_for(started.wait(), 5)
    b.add_worker("alive", ok)
    assert b.remove_worker("lost") == 1
    assert await asyncio.wait_for(job, 5) == 42
    stats = b.stats()
    assert stats["requeued_from"] == {"lost": ["21"]} and not stats["workers"]["lost"]["alive"]
    assert b.remove_worker("lost") == 0
    await b.aclose()
