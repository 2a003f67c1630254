"""Island bookkeeping cost at scale: insert + select time and memory at N candidates.

    python benchmarks/islands_bench.py [--candidates 10000] [--json outputs/islands_bench.json]

Builds one island holding N evaluated candidates whose sources are real kernels (the
descriptor corpus, each copy made unique), then measures per operation, with N already
held: `Island.add` (descriptor analysis + archive insert + history) followed by
`select_parent`; the archive alone (`Archive.insert` with a precomputed cell) followed by
`select_parent`; the same with the descriptor computed beforehand (`add(descriptor=)`,
as when it is computed next to the evaluation); `describe` alone; `next_request_context`. Memory: tracemalloc's count of
what the island and its candidates hold (sources included), and the process RSS growth.
Targets: insert + select under 50 us, memory under 100 MB at 10,000 candidates.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import random
import statistics
import sys
import time
import tracemalloc

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from foundry.types import Candidate, EvalResult  # noqa: E402
from islands import Island, IslandConfig, describe  # noqa: E402

CORPUS = ROOT / "tests" / "islands" / "corpus"
BACKENDS = {"triton": "triton", "cuda": "cuda", "cudainline": "cuda_inline", "c": "c"}
TARGET_US = 50.0
TARGET_MB = 100.0


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def make_pairs(n: int, *, seed: int, island_id: int = 0) -> list[tuple]:
    rng = random.Random(seed)
    files = sorted(CORPUS.glob("*.py"))
    bases = [(p.read_text(), BACKENDS[p.name.split("_")[0]]) for p in files]
    pairs = []
    for i in range(n):
        text, backend = bases[rng.randrange(len(bases))]
        source = f"{text}\n# candidate {seed}-{i}: block {rng.choice([64, 128, 256])}\n"
        cand = Candidate.make(task_id="bench/task", source=source, backend=backend,
                              island_id=island_id, generation=i, origin="llm")
        stage = rng.choice([0, 1, 2, 3, 4, 5, 5, 5])
        res = EvalResult(candidate_id=cand.candidate_id, task_id="bench/task", stage=stage,
                         correct=stage == 5,
                         speedup_eager=rng.uniform(0.2, 5.0) if stage == 5 else None,
                         runtime_ms=rng.uniform(0.01, 3.0), error="" if stage == 5 else
                         "RuntimeError: " + "x" * rng.randrange(50, 400))
        pairs.append((cand, res))
    return pairs


def fill(island: Island, pairs) -> None:
    for cand, res in pairs:
        island.add(candidate=cand, result=res)


def timed(fn, items) -> tuple[list[float], float]:
    """Per-operation wall times (us) and the mean CPU time per operation (us): on a
    shared machine the CPU time is the steadier figure."""
    items = list(items)
    out = []
    cpu0 = time.process_time()
    for item in items:
        t0 = time.perf_counter_ns()
        fn(item)
        out.append((time.perf_counter_ns() - t0) / 1000.0)
    return out, (time.process_time() - cpu0) / len(items) * 1e6


def summary(timing: tuple[list[float], float]) -> dict:
    us, cpu_us = timing
    s = sorted(us)
    return {"cpu_mean_us": cpu_us, "wall_mean_us": statistics.fmean(s),
            "wall_p50_us": s[len(s) // 2], "wall_p99_us": s[int(len(s) * 0.99)], "n": len(s)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--candidates", type=int, default=10_000)
    ap.add_argument("--ops", type=int, default=2_000, help="timed operations per row")
    ap.add_argument("--json", default="outputs/islands_bench.json")
    args = ap.parse_args()
    n, ops = args.candidates, args.ops
    cfg = IslandConfig()

    # memory: everything the island holds for n candidates, sources included
    pairs = make_pairs(n, seed=1)
    source_mb = sum(len(c.source) for c, _ in pairs) / 2**20
    del pairs
    rss0 = _rss_mb()
    tracemalloc.start()
    base, _ = tracemalloc.get_traced_memory()
    island = Island(island_id=0, task_id="bench/task", config=cfg, seed=0)
    fill(island, make_pairs(n, seed=1))
    held, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    mem_mb, peak_mb, rss_growth = (held - base) / 2**20, (peak - base) / 2**20, _rss_mb() - rss0

    # time: with n candidates already held
    load = os.getloadavg()[0]
    extra = make_pairs(ops, seed=2)
    t_add_select = timed(lambda p: (island.add(candidate=p[0], result=p[1]),
                                    island.select_parent()), extra)
    extra_pre = make_pairs(ops, seed=4)
    pre = [describe(source=c.source, backend=c.backend) for c, _ in extra_pre]
    t_add_pre = timed(lambda i: (island.add(candidate=extra_pre[i][0], result=extra_pre[i][1],
                                            descriptor=pre[i]), island.select_parent()),
                      range(ops))
    extra2 = make_pairs(ops, seed=3)
    cells = [island.describe(c)[1] for c, _ in extra2]
    arch = island.archive
    t_archive = timed(lambda i: (arch.insert(candidate=extra2[i][0], result=extra2[i][1],
                                             cell=cells[i]), island.select_parent()),
                      range(ops))
    t_describe = timed(lambda p: describe(source=p[0].source, backend=p[0].backend), extra)
    t_select = timed(lambda _: island.select_parent(), range(ops))
    t_context = timed(lambda _: island.next_request_context(), range(ops))

    rows = {
        "island.add + select_parent": summary(t_add_select),
        "island.add(descriptor=) + select": summary(t_add_pre),
        "archive.insert + select_parent": summary(t_archive),
        "describe (descriptor analysis)": summary(t_describe),
        "select_parent": summary(t_select),
        "next_request_context": summary(t_context),
    }
    report = {
        "candidates": n, "timed_ops": ops, "stats": island.stats().__dict__,
        "history": len(island.history), "timings": rows,
        "memory": {"tracemalloc_held_mb": mem_mb, "tracemalloc_peak_mb": peak_mb,
                   "rss_growth_mb": rss_growth, "source_text_mb": source_mb},
        "targets": {"insert_select_us": TARGET_US, "memory_mb": TARGET_MB},
        "machine": {"python": platform.python_version(), "platform": platform.platform(),
                    "processor": platform.machine()},
        "load_average": load, "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }
    print(f"islands benchmark: {n} candidates held, {ops} timed operations each")
    print(f"load average before timing: {load:.2f} (a shared machine inflates wall times)")
    print(f"{'operation':34s} {'cpu us':>8s} {'wall mean':>10s} {'wall p50':>9s} "
          f"{'wall p99':>9s}")
    for name, r in rows.items():
        print(f"{name:34s} {r['cpu_mean_us']:8.1f} {r['wall_mean_us']:10.1f} "
              f"{r['wall_p50_us']:9.1f} {r['wall_p99_us']:9.1f}")
    print(f"memory held for {n} candidates: {mem_mb:.1f} MB (tracemalloc; peak {peak_mb:.1f},"
          f" RSS growth {rss_growth:.1f}); their source text alone: {source_mb:.1f} MB")
    print(f"archive: {island.stats().occupied} cells occupied, QD-score "
          f"{island.stats().qd_score:.1f}")
    ok_time = rows["island.add + select_parent"]["cpu_mean_us"] < TARGET_US
    ok_arch = rows["archive.insert + select_parent"]["cpu_mean_us"] < TARGET_US
    ok_pre = rows["island.add(descriptor=) + select"]["cpu_mean_us"] < TARGET_US
    ok_mem = mem_mb < TARGET_MB
    print(f"target insert+select < {TARGET_US:.0f} us (CPU time): island.add path "
          f"{'MET' if ok_time else 'MISSED'}, with a precomputed descriptor "
          f"{'MET' if ok_pre else 'MISSED'}, archive path {'MET' if ok_arch else 'MISSED'};"
          f" memory < {TARGET_MB:.0f} MB: {'MET' if ok_mem else 'MISSED'}")
    out = pathlib.Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
