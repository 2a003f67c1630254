"""Property tests of the archive's invariants."""

import json
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from foundry.types import Candidate, EvalResult
from islands import Archive, Bins, InsertStatus, fitness_of

BINS = Bins.default()
cells = st.tuples(*(st.integers(0, 3) for _ in range(3)))
speedups = st.one_of(st.none(), st.floats(min_value=0.0, max_value=50.0, allow_nan=False))
offers = st.lists(st.tuples(cells, st.integers(0, 5), speedups), min_size=1, max_size=60)


def _pair(i: int, stage: int, speedup):
    cand = Candidate.make(task_id="t", source=f"kernel {i}", backend="c")
    res = EvalResult(candidate_id=cand.candidate_id, task_id="t", stage=stage,
                     correct=stage == 5, speedup_eager=speedup if stage == 5 else None)
    return cand, res


def _fill(archive: Archive, seq):
    log = []
    for i, (cell, stage, speedup) in enumerate(seq):
        cand, res = _pair(i, stage, speedup)
        before = archive.stats()
        status = archive.insert(candidate=cand, result=res, cell=cell, generation=i)
        log.append((cell, cand, res, status, before, archive.stats()))
    return log


@settings(max_examples=150, deadline=None)
@given(offers)
def test_one_elite_per_cell_and_it_is_the_best_ever_inserted_there(seq):
    archive = Archive(bins=BINS)
    log = _fill(archive, seq)
    best: dict = {}
    for cell, cand, res, status, _, _ in log:
        f = fitness_of(res)
        if cell not in best:
            assert status is InsertStatus.NEW
            best[cell] = (f, cand.candidate_id)
        elif f > best[cell][0]:
            assert status is InsertStatus.IMPROVED
            best[cell] = (f, cand.candidate_id)
        else:
            assert status is InsertStatus.REJECTED
    elites = archive.elites()
    assert len({e.cell for e in elites}) == len(elites) == len(best)
    for e in elites:
        assert (e.fitness, e.candidate_id) == best[e.cell]
        assert len(archive.cell_history(e.cell)) == sum(1 for x in log if x[0] == e.cell)
    overall = max(f for f, _ in best.values())
    assert archive.stats().best_fitness == overall == archive.best().fitness


@settings(max_examples=150, deadline=None)
@given(offers)
def test_qd_score_and_coverage_never_decrease(seq):
    archive = Archive(bins=BINS)
    for *_, before, after in _fill(archive, seq):
        assert after.qd_score >= before.qd_score
        assert after.coverage >= before.coverage
        assert after.inserts == before.inserts + 1
    s = archive.stats()
    assert math.isclose(s.qd_score, sum(e.fitness for e in archive.elites()))
    assert s.coverage == len(archive.elites()) / 64
    assert s.new + s.improved + s.rejected == s.inserts == len(seq)


@settings(max_examples=100, deadline=None)
@given(offers)
def test_a_correct_kernel_always_outranks_an_incorrect_one(seq):
    archive = Archive(bins=BINS)
    log = _fill(archive, seq)
    for e in archive.elites():
        if any(c == e.cell and r.correct for c, _, r, *_ in log):
            assert e.correct


@settings(max_examples=60, deadline=None)
@given(offers)
def test_checkpoint_state_round_trip_is_identical(seq):
    archive = Archive(bins=BINS)
    _fill(archive, seq)
    state = json.loads(json.dumps(archive.state_dict()))
    restored = Archive.from_state(state)
    assert restored.elites() == archive.elites()
    assert restored.stats() == archive.stats()
    assert restored.bins == archive.bins
    for e in archive.elites():
        assert restored.cell_history(e.cell) == archive.cell_history(e.cell)
    assert restored.state_dict() == archive.state_dict()


def test_correct_without_speedup_ranks_above_every_failure():
    cand, res = _pair(0, 5, None)
    assert fitness_of(res) == 5.0
    assert all(fitness_of(_pair(1, s, None)[1]) < 5.0 for s in range(5))
