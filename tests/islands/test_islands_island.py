"""Island bookkeeping: each failure peers were reported for, tested here."""

import dataclasses
import math
import random

import pytest

from islands import InsertStatus, Island, IslandConfig

from island_helpers import corpus_files, make_candidate, make_result

TASK = "level1/19_ReLU"


def _seed_island(island: Island, *, n: int = 8, stages=(5,)) -> list:
    """Fill an island with corpus kernels (different cells), returns the candidates."""
    files = [p.name for p in corpus_files() if p.name.startswith("triton")][:n]
    out = []
    for i, name in enumerate(files):
        cand = make_candidate(task_id=TASK, island_id=island.island_id, corpus=name,
                              tag=f"i{island.island_id}-{i}")
        stage = stages[i % len(stages)]
        island.add(candidate=cand, result=make_result(cand, stage=stage, speedup=1.0 + i))
        out.append(cand)
    return out


def test_empty_island_asks_to_translate():
    island = Island(island_id=0, task_id=TASK, seed=0)
    assert island.select_parent() is None
    ctx = island.next_request_context()
    assert (ctx.mode, ctx.parent, ctx.inspirations, ctx.selection) == (
        "translate", None, (), "none")


def test_child_on_the_wrong_island_is_refused():
    islands = [Island(island_id=i, task_id=TASK, seed=i) for i in range(2)]
    parent = make_candidate(task_id=TASK, island_id=0)
    islands[0].add(candidate=parent, result=make_result(parent))
    # a child of island 0's parent, wrongly tagged for island 1 and sent there
    stray = make_candidate(task_id=TASK, island_id=1, parent_ids=(parent.candidate_id,))
    with pytest.raises(ValueError, match="never on island 1"):
        islands[1].add(candidate=stray, result=make_result(stray))
    # a child tagged for island 0 but delivered to island 1
    misrouted = make_candidate(task_id=TASK, island_id=0, parent_ids=(parent.candidate_id,))
    with pytest.raises(ValueError, match="belongs to island 0, not island 1"):
        islands[1].add(candidate=misrouted, result=make_result(misrouted))
    assert islands[1].generation == 0 and not islands[1].history
    # the right island takes it, and the request context names that island
    ok = islands[0].add(candidate=misrouted, result=make_result(misrouted))
    assert ok.status in (InsertStatus.NEW, InsertStatus.IMPROVED, InsertStatus.REJECTED)
    assert islands[0].next_request_context().island_id == 0


def test_wrong_task_or_mismatched_result_is_refused():
    island = Island(island_id=0, task_id=TASK, seed=0)
    other = make_candidate(task_id="level1/20_LeakyReLU", island_id=0)
    with pytest.raises(ValueError, match="20_LeakyReLU"):
        island.add(candidate=other, result=make_result(other))
    a, b = make_candidate(task_id=TASK), make_candidate(task_id=TASK)
    with pytest.raises(ValueError, match="result is for candidate"):
        island.add(candidate=a, result=make_result(b))


def test_every_island_advances_its_own_generation():
    islands = [Island(island_id=i, task_id=TASK, seed=i) for i in range(4)]
    rng = random.Random(7)
    expected = [0, 0, 0, 0]
    for _ in range(60):
        i = rng.randrange(4)
        ctx = islands[i].next_request_context()
        parents = (ctx.parent.candidate_id,) if ctx.parent else ()
        child = make_candidate(task_id=TASK, island_id=ctx.island_id, parent_ids=parents)
        out = islands[i].add(candidate=child, result=make_result(child, stage=rng.randrange(6)))
        expected[i] += 1
        assert out.generation == expected[i]
        assert [isl.generation for isl in islands] == expected
    assert all(g > 5 for g in expected)


def test_inspirations_come_only_from_the_islands_own_archive():
    a = Island(island_id=0, task_id=TASK, seed=1)
    b = Island(island_id=1, task_id=TASK, seed=2)
    _seed_island(a)
    _seed_island(b)
    ids_a = {e.candidate_id for e in a.archive.elites()}
    ids_b = {e.candidate_id for e in b.archive.elites()}
    assert ids_a and ids_b and not ids_a & ids_b
    for _ in range(200):
        ctx = a.next_request_context()
        got = {e.candidate_id for e in ctx.inspirations}
        assert got <= ids_a and not got & ids_b
        assert ctx.parent.cell not in {e.cell for e in ctx.inspirations}
        assert ctx.parent.candidate_id not in got
        assert len(ctx.inspirations) == min(3, len(ids_a) - 1)


def test_inspirations_prefer_higher_levels():
    island = Island(island_id=0, task_id=TASK, seed=3)
    _seed_island(island, n=10)
    low = min(island.archive.elites(), key=lambda e: sum(e.cell))
    high = max(island.archive.elites(), key=lambda e: sum(e.cell))
    assert sum(high.cell) > sum(low.cell)
    counts = {low.candidate_id: 0, high.candidate_id: 0}
    parent = next(e for e in island.archive.elites() if e not in (low, high))
    for _ in range(3000):
        for e in island.inspirations(parent=parent, k=1):
            if e.candidate_id in counts:
                counts[e.candidate_id] += 1
    assert counts[high.candidate_id] > 1.5 * counts[low.candidate_id]


def test_selection_mix_matches_configured_weights():
    cfg = IslandConfig(exploration_weight=0.2, exploitation_weight=0.7, random_weight=0.1)
    island = Island(island_id=0, task_id=TASK, config=cfg, seed=11)
    _seed_island(island)
    n = 20_000
    counts = {"exploration": 0, "exploitation": 0, "random": 0}
    for _ in range(n):
        counts[island.select_parent().mode] += 1
    for mode, w in zip(counts, cfg.selection_weights):
        sd = math.sqrt(n * w * (1 - w))
        assert abs(counts[mode] - n * w) < 4 * sd, (mode, counts)


def test_custom_weights_are_honoured_too():
    cfg = IslandConfig(exploration_weight=1, exploitation_weight=0, random_weight=3)
    island = Island(island_id=0, task_id=TASK, config=cfg, seed=5)
    _seed_island(island)
    modes = [island.select_parent().mode for _ in range(8000)]
    assert "exploitation" not in modes
    frac = modes.count("random") / len(modes)
    assert abs(frac - 0.75) < 4 * math.sqrt(0.75 * 0.25 / len(modes))


def test_exploitation_is_a_softmax_over_elite_fitness():
    cfg = IslandConfig(exploration_weight=0, exploitation_weight=1, random_weight=0,
                       softmax_temperature=1.0)
    island = Island(island_id=0, task_id=TASK, config=cfg, seed=9)
    _seed_island(island, n=4)
    probs = island.archive.softmax_probabilities(temperature=1.0)
    elites = island.archive.elites()
    z = sum(math.exp(e.fitness) for e in elites)
    for e in elites:
        assert probs[e.cell] == pytest.approx(math.exp(e.fitness) / z)
    n = 20_000
    hits = {e.cell: 0 for e in elites}
    for _ in range(n):
        hits[island.select_parent().parent.cell] += 1
    for cell, p in probs.items():
        assert abs(hits[cell] / n - p) < 4 * math.sqrt(p * (1 - p) / n) + 1e-9


def test_history_keeps_failures_and_failed_parents_get_repair_requests():
    cfg = IslandConfig(exploration_weight=0, exploitation_weight=0, random_weight=1)
    island = Island(island_id=0, task_id=TASK, config=cfg, seed=2)
    _seed_island(island, n=6, stages=(1, 2, 4))
    assert len(island.history) == 6
    assert [h.result.stage for h in island.history] == [1, 2, 4, 1, 2, 4]
    assert len(island.recent_failures(limit=10)) == 6
    modes = {island.next_request_context().mode for _ in range(50)}
    assert modes == {"repair"}
    empty = dataclasses.replace(make_candidate(task_id=TASK), source="", note="no code")
    empty = dataclasses.replace(empty, candidate_id="nocode1")
    out = island.add(candidate=empty, result=make_result(empty, stage=0))
    assert out.status is InsertStatus.REJECTED and len(island.history) == 7
    assert all(e.candidate.source for e in island.archive.elites())


def test_add_fills_the_descriptor_and_context_builds_a_proposal_request():
    from foundry.types import Task
    island = Island(island_id=2, task_id=TASK, seed=0)
    cand = make_candidate(task_id=TASK, island_id=2, corpus="triton_softmax_online.py")
    out = island.add(candidate=cand, result=make_result(cand, speedup=2.0))
    assert out.cell == (1, 3, 2) and out.result.descriptor == (1, 3, 2)
    assert island.history[0].result.descriptor == (1, 3, 2)
    ctx = island.next_request_context()
    task = Task(task_id=TASK, path="/dev/null", source="")
    req = ctx.proposal_request(task=task, backend="triton", prompt_id="p1")
    assert (req.mode, req.island_id, req.parent, req.prompt_id) == (
        "optimize", 2, cand, "p1")
    assert "compute level 3" in req.descriptor_hint


def test_records_and_islands_pickle_for_ray():
    """Elites travel between island actors and islands are restored by Ray: both pickle."""
    import pickle
    island = Island(island_id=1, task_id=TASK, seed=4)
    _seed_island(island, n=3)
    for elite in island.archive.elites():
        assert pickle.loads(pickle.dumps(elite)) == elite
    ctx = island.next_request_context()
    assert pickle.loads(pickle.dumps(ctx)) == ctx
    clone = pickle.loads(pickle.dumps(island))
    assert clone.state_dict() == island.state_dict()
    assert clone.next_request_context() == island.next_request_context()


def test_add_accepts_a_precomputed_descriptor_of_the_right_backend():
    from islands import describe
    island = Island(island_id=0, task_id=TASK, seed=0)
    cand = make_candidate(task_id=TASK, corpus="cuda_sum_warp_block_atomic.py")
    d = describe(source=cand.source, backend="cuda")
    assert island.add(candidate=cand, result=make_result(cand), descriptor=d).cell == (2, 2, 3)
    other = make_candidate(task_id=TASK, corpus="triton_relu_block.py")
    with pytest.raises(ValueError, match="backend 'cuda', not 'triton'"):
        island.add(candidate=other, result=make_result(other), descriptor=d)


def test_would_enter_says_what_add_will_do_and_changes_nothing():
    island = Island(island_id=0, task_id=TASK, seed=0)
    first = make_candidate(task_id=TASK, island_id=0, tag="a")
    assert island.would_enter(candidate=first, result=make_result(first, speedup=1.5))
    assert len(island.archive) == 0  # asking inserts nothing
    island.add(candidate=first, result=make_result(first, speedup=1.5))
    same_cell_slower = make_candidate(task_id=TASK, island_id=0, tag="b")
    assert not island.would_enter(candidate=same_cell_slower, result=make_result(same_cell_slower, speedup=1.2))
    faster = make_candidate(task_id=TASK, island_id=0, tag="c")
    assert island.would_enter(candidate=faster, result=make_result(faster, speedup=2.0))
    no_code = dataclasses.replace(faster, source="")
    assert not island.would_enter(candidate=no_code, result=make_result(faster, speedup=9.0))
    status = island.add(candidate=same_cell_slower, result=make_result(same_cell_slower, speedup=1.2)).status
    assert status is InsertStatus.REJECTED
