"""Checkpoints: atomic files; a restored island continues exactly where it stopped."""

import json
import os
import random
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from islands import Island, IslandConfig
from islands.checkpoint import CheckpointError

from island_helpers import corpus_files, make_candidate, make_result

TASK = "level1/19_ReLU"
SOURCES = [p.name for p in corpus_files()]


def _step(island: Island, rng: random.Random, i: int):
    ctx = island.next_request_context()
    parents = (ctx.parent.candidate_id,) if ctx.parent else ()
    child = make_candidate(task_id=TASK, island_id=island.island_id,
                           corpus=SOURCES[rng.randrange(len(SOURCES))], parent_ids=parents,
                           tag=f"step{i}")
    out = island.add(candidate=child, result=make_result(
        child, stage=rng.choice([0, 1, 3, 5, 5]), speedup=rng.uniform(0.1, 4.0)))
    return ctx, out


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 40), st.integers(1, 25), st.integers(0, 2**31 - 1))
def test_restored_island_continues_exactly(before, after, seed):
    with tempfile.TemporaryDirectory() as d:
        _round_trip_then_continue(os.path.join(d, "island.json"), before, after, seed)


def _round_trip_then_continue(tmp: str, before: int, after: int, seed: int):
    cfg = IslandConfig(migration_interval=3, extra_axes={"tunable_count": [1]})
    original = Island(island_id=1, task_id=TASK, config=cfg, seed=seed)
    rng = random.Random(seed)
    for i in range(before):
        _step(original, rng, i)
    if original.migration_due():
        original.emigrants()
    original.save(tmp)
    restored = Island.load(tmp)
    assert restored.state_dict() == original.state_dict()
    assert restored.history == original.history
    assert restored.archive.elites() == original.archive.elites()
    rng_a, rng_b = random.Random(seed + 1), random.Random(seed + 1)
    for i in range(before, before + after):
        ctx_a, out_a = _step(original, rng_a, i)
        ctx_b, out_b = _step(restored, rng_b, i)
        assert ctx_a == ctx_b and out_a == out_b
    assert restored.state_dict() == original.state_dict()
    assert restored.emigrants() == original.emigrants()


def test_save_replaces_atomically_and_leaves_no_temp_files(tmp_path, monkeypatch):
    path = tmp_path / "ckpt" / "island-0.json"
    island = Island(island_id=0, task_id=TASK, seed=0)
    rng = random.Random(0)
    _step(island, rng, 0)
    island.save(path)
    first = path.read_text()
    _step(island, rng, 1)

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        island.save(path)
    monkeypatch.undo()
    assert path.read_text() == first  # the old checkpoint survived intact
    assert sorted(p.name for p in path.parent.iterdir()) == ["island-0.json"]
    island.save(path)
    assert Island.load(path).generation == 2
    assert sorted(p.name for p in path.parent.iterdir()) == ["island-0.json"]


def test_checkpoint_holds_the_bin_definitions(tmp_path):
    cfg = IslandConfig(extra_axes={"source_lines": [25, 50]})
    island = Island(island_id=3, task_id=TASK, config=cfg, seed=0)
    path = tmp_path / "i.json"
    island.save(path)
    state = json.loads(path.read_text())["state"]
    assert state["archive"]["bins"]["axes"][3] == {
        "name": "source_lines", "kind": "edges", "size": 3, "edges": [25.0, 50.0]}
    assert Island.load(path).bins == island.bins


def test_bad_files_are_named(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        Island.load(tmp_path / "missing.json")
    bad = tmp_path / "torn.json"
    bad.write_text('{"magic": "kernelfoundry-island", "state": {')
    with pytest.raises(CheckpointError, match="torn.json"):
        Island.load(bad)
    other = tmp_path / "other.json"
    other.write_text("{}")
    with pytest.raises(CheckpointError, match="not an island checkpoint"):
        Island.load(other)
