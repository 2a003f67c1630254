"""The main job on a 3-node Ray cluster on one machine (a head without GPUs and two
worker nodes of 2 logical GPUs each, token authentication), joined with `ray.address=`:
an evaluator on every logical GPU of both worker nodes, evaluations judged on both,
islands spread over the nodes and migrating between nodes; then a worker node removed
mid-run (its raylet and every process on it killed): the run still spends its budget,
what the lost node was evaluating is judged elsewhere or recorded as unfinished, nothing
is lost or logged twice, and the report names the lost node.

The evaluators are stand-ins (`actors.standins.FixedCostEvaluator`): each sleeps a stated
time per candidate inside the evaluator actor, on the node Ray placed it, and each
result carries that node's id (`metrics.lane.node_id`)."""

from __future__ import annotations

import json
import threading
import time

import pytest

from foundry.store import read_evaluations
from foundry.store.unfinished import read_unfinished
from support.cluster_runs import evaluator_nodes, run_main

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def cluster(local_cluster_module):
    c = local_cluster_module.LocalCluster(base_port=23400)
    try:
        c.start_head(cpus=2, gpus=0)
        c.add_worker(cpus=2, gpus=2)  # one at a time: two starting at once on one host time out
        c.add_worker(cpus=2, gpus=2)
        yield c
    finally:
        c.shutdown()


def _worker_ids(cluster_summary: dict) -> list[str]:
    return [n["node_id"] for n in cluster_summary["nodes"] if not n["head"] and n["gpus"]]


def test_evaluators_on_every_gpu_of_both_workers_and_migration_across_nodes(cluster, tmp_path):
    run_dir = tmp_path / "run"
    run_main(cluster, run_dir, "budget.evaluations=60", "island.count=3", "island.migration_interval=2",
             "run.migrate_every_s=0.5", "+evaluator.cost_s=0.5")
    session = json.loads((run_dir / "run.json").read_text())["sessions"][-1]
    summary = session["cluster"]
    workers = _worker_ids(summary)
    assert len(summary["nodes"]) == 3 and len(workers) == 2
    evaluators = evaluator_nodes(run_dir)
    # one evaluator per logical GPU of each worker node, none on the head (it has no GPU)
    placed = sorted((e["node_id"], tuple(e["gpu_ids"])) for e in evaluators.values())
    assert placed == sorted((w, (g,)) for w in workers for g in ("0", "1")), placed
    assert all(e["node"] and not e["head_node"] for e in evaluators.values())
    records = read_evaluations(run_dir)
    assert len(records) == 60
    judged_on = {evaluators[r.evaluator]["node_id"] for r in records}
    assert judged_on == set(workers)
    # the result says where it was judged, and that is where evaluators.json puts its evaluator
    assert all(r.result.metrics["lane"]["node_id"] == evaluators[r.evaluator]["node_id"] for r in records)
    # islands on three different nodes; elites migrated between islands on different nodes
    assert len(set(summary["islands"].values())) == 3, summary["islands"]
    across = [m for m in summary["migrations"] if any(a != b for a, b in m["node_pairs"])]
    assert across and sum(m["elites"] for m in across) > 0, summary["migrations"]
    assert sum(m["entered"] for m in across) > 0, summary["migrations"]
    report = (run_dir / "report.md").read_text()
    assert "## Cluster" in report and all(e["node"] in report for e in evaluators.values())


def test_a_worker_node_lost_mid_run_and_one_added(cluster, tmp_path):
    """Runs last in this module: it takes one worker node away, then starts another."""
    run_dir = tmp_path / "run"
    budget = 70
    lost = {}

    def remove_a_worker():
        deadline = time.time() + 150
        while time.time() < deadline:
            time.sleep(0.3)
            victim = cluster.nodes[-1]  # the second worker node
            try:
                records = read_evaluations(run_dir)
                evaluators = evaluator_nodes(run_dir)
            except (OSError, ValueError, KeyError):
                continue
            # once both of its evaluators are at work (the islands keep more in flight than
            # there are evaluators, so each holds a candidate)
            working = {evaluators[r.evaluator]["node_id"] for r in records if r.evaluator in evaluators}
            if len(records) >= 12 and len(working) == 2:
                done = len(records)
                lost.update(at=done, evaluators=evaluators)
                cluster.remove(victim)
                time.sleep(2.0)
                lost["added"] = cluster.add_worker(cpus=2, gpus=2, wait=False)
                return

    killer = threading.Thread(target=remove_a_worker, daemon=True)
    killer.start()
    proc = run_main(cluster, run_dir, f"budget.evaluations={budget}", "island.count=3",
                    "+evaluator.cost_s=1.0", "run.in_flight_per_island=4", "run.checkpoint_every_s=1",
                    "run.stop_timeout_s=30")
    killer.join(5)
    assert lost, "the run ended before a node was removed"
    meta = json.loads((run_dir / "run.json").read_text())
    session = meta["sessions"][-1]
    assert "evaluation budget spent" in meta["stop_reason"]
    (event,) = [e for e in session["cluster"]["events"] if e["event"] == "lost"]
    gone = event["node"]
    on_lost = {n for n, e in lost["evaluators"].items() if e["node_id"] == gone["node_id"]}
    assert len(on_lost) == 2 and set(event["evaluators"]) == on_lost
    assert event["islands"] and all(n != gone["label"] for n in event["islands_moved_to"].values())
    records = read_evaluations(run_dir)
    unfinished = read_unfinished(run_dir)
    keys = [(r.candidate.island_id, r.candidate.candidate_id) for r in records]
    assert len(set(keys)) == len(keys), "an evaluation was logged twice"
    # every submission is accounted for: judged (logged) or recorded as unfinished
    assert len(records) + len(unfinished) == budget, (len(records), len(unfinished))
    survivors = set(evaluator_nodes(run_dir)) - on_lost
    by_id = {r.candidate.candidate_id: r for r in records}
    sent_back = [cid for name in on_lost for cid in session["dispatch"]["requeued_from"].get(name, [])]
    assert sent_back, "nothing was in flight on the lost node"
    unfinished_ids = {u.candidate.candidate_id for u in unfinished}
    for cid in sent_back:
        assert (cid in by_id and by_id[cid].evaluator in survivors) or cid in unfinished_ids, cid
    # after the loss, the run went on with the other node's evaluators only
    late = [r for r in records[lost["at"] + 8:]]
    assert late and {r.evaluator for r in late} <= survivors
    # islands of the lost node went on elsewhere
    moved = {int(i) for i in event["islands_moved_to"]}
    assert any(r.candidate.island_id in moved for r in late)
    report = (run_dir / "report.md").read_text()
    assert f"node {gone['label']} lost" in report
    assert f"node {gone['label']} lost" in proc.stdout
    # the node started after the loss got an evaluator per GPU, and they judged candidates
    (joined,) = [e for e in session["cluster"]["events"] if e["event"] == "added"]
    assert len(joined["evaluators"]) == 2 and not set(joined["evaluators"]) & set(lost["evaluators"])
    assert {r.evaluator for r in records} & set(joined["evaluators"]), "the new node's evaluators judged nothing"
