"""How far one driver scales: judged candidates per minute with 1, 2, 4, ... logical GPUs
spread over the nodes of a local multi-node Ray cluster (benchmarks/local_cluster.py),
with stand-in evaluators of fixed cost, and where the CPU goes per candidate.

    python benchmarks/cluster_scaling.py                       # 8 nodes x 4 logical GPUs; 0.5 s and 2 s
    python benchmarks/cluster_scaling.py --gpus 1,2,4 --costs 2 --seconds 30 --out scaling.json

Each run is the real main job (`python -m foundry`, joined to the cluster with
`ray.address=`), its dispatcher, islands, ledger and Parquet log as in any run; only the
parts at the ends are stand-ins: each evaluator (`actors.standins.FixedCostEvaluator`)
sleeps the stated cost per candidate in its actor, on the node Ray placed it, one
candidate at a time (one lane, as a GPU times one at a time); the proposer returns a
new valid `c` candidate per call. `ray.max_gpu_evaluators=N` takes N of the cluster's
logical GPUs, round-robin over the nodes (N=1: one node; N=8 on 8 nodes: one per node).

Per run: the steady-state rate (the middle 80% of the run's evaluations, by the time
each one's judging ended in its evaluator), that rate as a multiple of the 1-GPU rate of the same cost, its share of
the ideal N/cost, and, over the same window, the CPU milliseconds per judged candidate
of the driver (Parquet writer, progress, polls), the dispatcher actor, the island actors
and the evaluator actors (sampled from /proc every 0.5 s, for the processes of this
cluster's nodes only), the CPU cores they kept busy together, and how long after its
judging each evaluation reached the Parquet log (median and 90th percentile).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from local_cluster import LocalCluster  # noqa: E402

ROLES = ("DispatcherActor", "IslandActor", "EvaluatorActor", "PromptEvolverActor")
TICK = os.sysconf("SC_CLK_TCK")


def _cpu_by_pid(sids: set[int], driver: int | None) -> dict[int, tuple[str, float]]:
    """pid -> (role, CPU seconds so far) for the Ray actor processes of these sessions (the
    cluster's nodes) and the driver."""
    out: dict[int, tuple[str, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            if pid != driver and os.getsid(pid) not in sids:
                continue
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
            stat = Path(f"/proc/{pid}/stat").read_text()
        except (OSError, ProcessLookupError):
            continue
        role = "driver" if pid == driver else next((r for r in ROLES if cmd.startswith(f"ray::{r}")), None)
        if role is None:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        out[pid] = (role, (int(fields[11]) + int(fields[12])) / TICK)
    return out


class CpuSampler(threading.Thread):
    """Samples the cumulative CPU time of the driver and of each actor role every
    `every_s`, as a time series (a process that ended keeps its last sample)."""

    def __init__(self, sids: set[int], every_s: float = 0.5):
        super().__init__(daemon=True)
        self.sids, self.every_s = sids, every_s
        self.driver: int | None = None
        self.seen: dict[int, tuple[str, float]] = {}
        self.series: list[tuple[float, dict[str, float]]] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            self.seen.update(_cpu_by_pid(self.sids, self.driver))
            totals = {r: 0.0 for r in ("driver", *ROLES)}
            for role, cpu in self.seen.values():
                totals[role] += cpu
            self.series.append((time.time(), totals))
            self.halt.wait(self.every_s)

    def between(self, lo: float, hi: float) -> dict[str, float]:
        """CPU seconds of each role between the epoch times lo and hi (linear between samples)."""
        def at(t: float) -> dict[str, float]:
            before = [s for s in self.series if s[0] <= t] or self.series[:1]
            after = [s for s in self.series if s[0] >= t] or self.series[-1:]
            (t0, a), (t1, b) = before[-1], after[0]
            w = 0.0 if t1 == t0 else (t - t0) / (t1 - t0)
            return {k: a[k] + w * (b[k] - a[k]) for k in a}
        a, b = at(lo), at(hi)
        return {k: b[k] - a[k] for k in a}


def one_run(cluster: LocalCluster, *, run_dir: Path, gpus: int, cost_s: float, seconds: float, islands: int,
            tasks: str) -> dict:
    from foundry.store import read_evaluations
    in_flight = max(2, math.ceil(1.5 * gpus / islands))
    budget = max(20, math.ceil(gpus / cost_s * seconds))
    cmd = [sys.executable, "-m", "foundry", "+exp=smoke", f"tasks.path={tasks}", "run.backend=c",
           f"ray.address={cluster.address}", f"ray.max_gpu_evaluators={gpus}", "ray.slots_per_evaluator=1",
           "ray.evaluator_cpus=0", "run.evaluator_impl=actors.standins:fixed_cost_evaluator",
           f"+evaluator.cost_s={cost_s}", "run.proposer_impl=actors.standins:copy_kernel_proposer",
           "run.tune=false", f"island.count={islands}", f"run.in_flight_per_island={in_flight}",
           f"budget.evaluations={budget}", f"budget.wall_time_s={2 * seconds + 120}", "run.progress=off",
           "run.checkpoint_every_s=10", f"hydra.run.dir={run_dir}"]
    sampler = CpuSampler({n.pid for n in cluster.nodes if n.proc.poll() is None})
    load = os.getloadavg()[0]
    t0 = time.time()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=cluster.client_env())
    sampler.driver = proc.pid
    sampler.start()
    out, err = proc.communicate()
    wall = time.time() - t0
    sampler.halt.set()
    sampler.join(5)
    if proc.returncode != 0:
        raise SystemExit(f"run with {gpus} GPU(s) failed:\n{out[-3000:]}\n{err[-3000:]}")
    records = read_evaluations(run_dir)
    # when each candidate's judging ended, by the evaluator's clock (the same machine's):
    # the log's own timestamps are those of the driver's drains, batched, and late when
    # the driver falls behind
    ended = sorted(r.result.metrics["lane"]["started_at"] + r.result.metrics["lane"]["busy_s"] for r in records)
    lag = sorted(r.recorded_at - (r.result.metrics["lane"]["started_at"] + r.result.metrics["lane"]["busy_s"])
                 for r in records)
    n = len(ended)
    i_lo, i_hi = n // 10, (9 * n) // 10
    lo, hi = (ended[i_lo], ended[i_hi]) if n >= 10 else (float("nan"), float("nan"))
    judged = i_hi - i_lo  # candidates judged in the steady window
    per_min = 60 * judged / (hi - lo) if n >= 10 and hi > lo else float("nan")
    cpu = sampler.between(lo, hi) if n >= 10 else {}
    evaluators = json.loads((run_dir / "evaluators.json").read_text())

    def per(role: str) -> float:
        return round(1000 * cpu.get(role, float("nan")) / judged, 2) if judged else float("nan")
    return {"cost_s": cost_s, "gpus": gpus, "nodes": len({e.get("node_id") for e in evaluators}),
            "islands": islands, "in_flight": islands * in_flight, "evaluations": n,
            "candidates_per_min": round(per_min, 1), "ideal_per_min": round(60 * gpus / cost_s, 1),
            "window_s": round(hi - lo, 1),
            "log_lag_median_s": round(lag[n // 2], 2) if n else None,
            "log_lag_p90_s": round(lag[(9 * n) // 10], 2) if n else None,
            "driver_cpu_ms_per_candidate": per("driver"),
            "dispatcher_cpu_ms_per_candidate": per("DispatcherActor"),
            "islands_cpu_ms_per_candidate": per("IslandActor"),
            "evaluators_cpu_ms_per_candidate": per("EvaluatorActor"),
            "window_cpu_cores": round(sum(cpu.values()) / (hi - lo), 2) if n >= 10 and hi > lo else None,
            "wall_s": round(wall, 1), "load_before": round(load, 2),
            "stop_reason": json.loads((run_dir / "run.json").read_text()).get("stop_reason")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=8, help="nodes of the local cluster, the head included")
    ap.add_argument("--gpus-per-node", type=int, default=4, help="logical GPUs per node")
    ap.add_argument("--gpus", default="1,2,4,8,16,32", help="evaluator counts to measure")
    ap.add_argument("--costs", default="0.5,2", help="stand-in seconds per evaluation")
    ap.add_argument("--seconds", type=float, default=40, help="aimed length of each run's judging")
    ap.add_argument("--islands", type=int, default=8)
    ap.add_argument("--tasks", default=str(ROOT / "benchmarks" / "smoke"))
    ap.add_argument("--base-port", type=int, default=27400)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    gpu_counts = [int(g) for g in args.gpus.split(",")]
    costs = [float(c) for c in args.costs.split(",")]
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="cluster-scaling-") as tmp, \
            LocalCluster(base_port=args.base_port) as cluster:
        cluster.start_head(cpus=2, gpus=args.gpus_per_node)
        for _ in range(args.nodes - 1):
            cluster.add_worker(cpus=2, gpus=args.gpus_per_node)
        print(f"cluster: {args.nodes} nodes x {args.gpus_per_node} logical GPUs", flush=True)
        for cost in costs:
            base = None
            for gpus in gpu_counts:
                row = one_run(cluster, run_dir=Path(tmp) / f"c{cost}-g{gpus}", gpus=gpus, cost_s=cost,
                              seconds=args.seconds, islands=args.islands, tasks=args.tasks)
                base = row["candidates_per_min"] if gpus == 1 else base
                row["x_1gpu"] = round(row["candidates_per_min"] / base, 2) if base else None
                row["share_of_ideal"] = round(row["candidates_per_min"] / row["ideal_per_min"], 3)
                rows.append(row)
                print(json.dumps(row), flush=True)
                if args.out:
                    args.out.write_text(json.dumps(rows, indent=2))
    print("\n| cost | GPUs | nodes | cand/min | x 1 GPU | of ideal | CPU ms per candidate: driver | dispatcher "
          "| islands | evaluators | cores busy | log lag p50/p90 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['cost_s']:g} s | {r['gpus']} | {r['nodes']} | {r['candidates_per_min']:.0f} | {r['x_1gpu']} | "
              f"{r['share_of_ideal']:.0%} | {r['driver_cpu_ms_per_candidate']} | "
              f"{r['dispatcher_cpu_ms_per_candidate']} | {r['islands_cpu_ms_per_candidate']} | "
              f"{r['evaluators_cpu_ms_per_candidate']} | {r['window_cpu_cores']} | "
              f"{r['log_lag_median_s']}/{r['log_lag_p90_s']} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
