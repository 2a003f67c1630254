"""Migration: ring by default, top fraction, dedup by content hash, migrants stay put."""

import collections
import random

import pytest

from islands import InsertStatus, Island, IslandConfig, Topology, migrate_due

from island_helpers import corpus_files, make_candidate, make_result

TASK = "level1/19_ReLU"
SOURCES = [p.name for p in corpus_files() if p.name.startswith("triton")]


def _evolve(islands, topology, *, steps: int, seed: int = 0):
    """Drive islands like the runtime does: each step one island proposes a child of its
    selected parent, adds it, and due islands migrate."""
    rng = random.Random(seed)
    for step in range(steps):
        island = islands[step % len(islands)]
        ctx = island.next_request_context()
        parents = (ctx.parent.candidate_id,) if ctx.parent else ()
        child = make_candidate(task_id=TASK, island_id=island.island_id,
                               corpus=rng.choice(SOURCES), parent_ids=parents)
        stage = rng.choice([1, 2, 4, 5, 5])
        island.add(candidate=child, result=make_result(child, stage=stage,
                                                       speedup=rng.uniform(0.5, 3.0)))
        migrate_due(islands=islands, topology=topology)


def test_ring_targets_and_other_topologies():
    ring = Topology(kind="ring", count=4)
    assert [ring.targets(source=i) for i in range(4)] == [(1,), (2,), (3,), (0,)]
    assert Topology(kind="bidirectional_ring", count=4).targets(source=0) == (1, 3)
    assert Topology(kind="bidirectional_ring", count=2).targets(source=0) == (1,)
    assert Topology(kind="all_to_all", count=3).targets(source=1) == (0, 2)
    assert Topology(kind="none", count=3).targets(source=1) == ()
    assert Topology(kind="ring", count=1).targets(source=0) == ()
    with pytest.raises(ValueError, match="star"):
        Topology(kind="star", count=4)


@pytest.mark.parametrize("kind,max_copies", [("ring", 2), ("all_to_all", 4)])
def test_no_program_is_copied_again_and_again(kind, max_copies):
    """The '183 copies' failure: migrants re-migrating around the ring. Here a program
    exists at most once per island and on at most (home + its direct targets) islands."""
    cfg = IslandConfig(migration_interval=5, migration_fraction=0.3, topology=kind)
    islands = [Island(island_id=i, task_id=TASK, config=cfg, seed=i) for i in range(4)]
    _evolve(islands, Topology(kind=kind, count=4), steps=800)
    holders = collections.defaultdict(set)
    for island in islands:
        ids = [h.candidate.candidate_id for h in island.history]
        migrant_ids = [h.candidate.candidate_id for h in island.history if h.is_migrant]
        assert len(migrant_ids) == len(set(migrant_ids))
        assert not set(migrant_ids) & {h.candidate.candidate_id for h in island.history
                                       if not h.is_migrant}
        elite_ids = [e.candidate_id for e in island.archive.elites()]
        assert len(elite_ids) == len(set(elite_ids))
        for cid in set(ids):
            holders[cid].add(island.island_id)
    assert max(len(v) for v in holders.values()) <= max_copies
    received = sum(1 for isl in islands for h in isl.history if h.is_migrant)
    assert received > 10  # migration really happened


def test_migrants_never_migrate_again_and_are_marked():
    cfg = IslandConfig(migration_interval=1, migration_fraction=1.0)
    a, b, c = (Island(island_id=i, task_id=TASK, config=cfg, seed=i) for i in range(3))
    cand = make_candidate(task_id=TASK, island_id=0, corpus="triton_softmax_online.py")
    a.add(candidate=cand, result=make_result(cand, speedup=3.0))
    sent = a.emigrants()
    assert [e.candidate_id for e in sent] == [cand.candidate_id]
    assert b.immigrate(elites=sent) == [InsertStatus.NEW]
    copy = b.archive.elites()[0]
    assert copy.is_migrant and copy.candidate.origin == "migrant"
    assert copy.candidate.island_id == 1 and copy.home_island == 0
    assert copy.candidate_id == cand.candidate_id  # same content hash
    assert b.emigrants() == []  # it holds only a migrant: nothing to send
    with pytest.raises(ValueError, match="never migrates again"):
        c.immigrate(elites=[copy])
    # a child of the migrant is b's own kernel and may migrate
    child = make_candidate(task_id=TASK, island_id=1, corpus="triton_matmul_dot.py",
                           parent_ids=(copy.candidate_id,))
    b.add(candidate=child, result=make_result(child, speedup=4.0))
    assert [e.candidate_id for e in b.emigrants()] == [child.candidate_id]


def test_copies_are_deduplicated_by_content_hash():
    a = Island(island_id=0, task_id=TASK, seed=0)
    b = Island(island_id=1, task_id=TASK, seed=1)
    cand = make_candidate(task_id=TASK, island_id=0)
    a.add(candidate=cand, result=make_result(cand))
    elites = a.archive.elites()
    assert b.immigrate(elites=elites) == [InsertStatus.NEW]
    assert b.immigrate(elites=elites) == [InsertStatus.DUPLICATE]
    assert b.immigrate(elites=elites + elites) == [InsertStatus.DUPLICATE] * 2
    assert len(b.history) == 1
    # content b evaluated itself is not taken again either
    same = make_candidate(task_id=TASK, island_id=1, source="print(1)", backend="c", tag="z")
    b.add(candidate=same, result=make_result(same))
    twin = make_candidate(task_id=TASK, island_id=0, source="print(1)", backend="c", tag="z")
    a.add(candidate=twin, result=make_result(twin, speedup=9.0))
    assert twin.candidate_id == same.candidate_id
    assert b.immigrate(elites=[a.archive.get(a.describe(twin)[1])]) == [
        InsertStatus.DUPLICATE]


def test_receiving_island_applies_its_own_insert_rules():
    a = Island(island_id=0, task_id=TASK, seed=0)
    b = Island(island_id=1, task_id=TASK, seed=1)
    weak = make_candidate(task_id=TASK, island_id=0, corpus="triton_relu_block.py", tag="w")
    strong = make_candidate(task_id=TASK, island_id=1, corpus="triton_relu_block.py", tag="s")
    a.add(candidate=weak, result=make_result(weak, speedup=1.1))
    b.add(candidate=strong, result=make_result(strong, speedup=2.0))
    assert b.immigrate(elites=a.archive.elites()) == [InsertStatus.REJECTED]
    assert b.archive.elites()[0].candidate_id == strong.candidate_id
    assert a.immigrate(elites=b.archive.elites()) == [InsertStatus.IMPROVED]
    assert a.archive.elites()[0].is_migrant
    assert b.generation == 1 and a.generation == 1  # immigration is not a generation


def test_interval_and_fraction():
    cfg = IslandConfig(migration_interval=10, migration_fraction=0.1)
    island = Island(island_id=0, task_id=TASK, config=cfg, seed=0)
    for i, name in enumerate(SOURCES):
        cand = make_candidate(task_id=TASK, island_id=0, corpus=name)
        island.add(candidate=cand, result=make_result(cand, speedup=1.0 + i))
        assert island.migration_due() == (island.generation >= 10)
    n_elites = len(island.archive.elites())
    assert n_elites >= 8
    sent = island.emigrants()
    assert len(sent) == -(-n_elites // 10)  # ceil(10%)
    assert sent[0].fitness == max(e.fitness for e in island.archive.elites())
    assert not island.migration_due()
    assert island.emigrants() == []  # the same elites are not sent twice
