"""The throughput benchmark's count of elites carrying hardware metrics, read from real
island checkpoints (no run)."""

from __future__ import annotations

import dataclasses
import pathlib

from foundry.store.rundir import RunDir
from foundry.types import Candidate, EvalResult
from islands import Island
from support.benchmark_script import load_benchmark

CORPUS = pathlib.Path(__file__).resolve().parents[1] / "islands" / "corpus"
TASK = "level1/19_ReLU"


def test_elites_are_counted_once_with_the_source_of_their_profile(tmp_path):
    bench = load_benchmark("kernelbench_throughput")
    files = sorted(CORPUS.glob("triton*.py"))[:6]
    held = []
    for island_id in (0, 1):
        island = Island(island_id=island_id, task_id=TASK, seed=island_id)
        for k, path in enumerate(files):
            cand = Candidate.make(task_id=TASK, source=path.read_text(), backend="triton")
            cand = dataclasses.replace(cand, island_id=island_id)
            metrics = {"hardware": {"source": "ncu" if k == 0 else "torch-profiler", "profile_s": 2.0,
                                    "note": "" if k == 0 else f"Nsight Compute has had its share ({k} s)"}} \
                if k % 2 == 0 else {}
            island.add(candidate=cand, result=EvalResult(candidate_id=cand.candidate_id, task_id=TASK, stage=5,
                                                         correct=True, speedup_eager=1.0 + k, metrics=metrics))
        held += [(e.candidate.candidate_id, e.result.metrics) for e in island.archive.elites()]
        island.save(str(RunDir(tmp_path).island_checkpoint_dir(island_id) / "level1" / "19_ReLU.ckpt"))  # as workers save
    unique = dict(held)
    counted = bench.elite_profiles(tmp_path)
    assert counted["elites"] == len(unique) >= 2
    assert counted["with_hardware"] == sum(1 for m in unique.values() if m.get("hardware"))
    assert sum(counted["by_source"].values()) == counted["with_hardware"]
    assert counted["fraction"] == round(counted["with_hardware"] / counted["elites"], 3)
    by_profiler = sum(1 for m in unique.values() if (m.get("hardware") or {}).get("source") == "torch-profiler")
    assert counted["notes"] == ({"Nsight Compute has had its share (N s)": by_profiler} if by_profiler else {})
