"""The dispatcher's ledger: what the driver claimed is dropped; what a dead island
incarnation left behind, finished before or after its death, comes back once."""

from __future__ import annotations

from actors.ledger import Ledger, Settled
from foundry.types import Candidate, EvalResult


def _settled(i: int, island: int = 0) -> tuple[str, Settled]:
    cand = Candidate.make(task_id="t", source=f"# {i}", backend="c", island_id=island)
    res = EvalResult(candidate_id=cand.candidate_id, task_id="t", stage=4, correct=True)
    return cand.candidate_id, Settled(island_index=island, candidate=cand, result=res, evaluator="e")


def test_claimed_entries_are_never_orphans():
    led = Ledger()
    led.seen(origin="a", island_index=0)
    ids = []
    for i in range(3):
        cid, s = _settled(i)
        led.file(origin="a", submitted_id=cid, settled=s)
        ids.append(cid)
    assert led.claim(origin="a", submitted_ids=ids[:2]) == 2
    assert led.take_orphans() == []  # the island is alive
    led.mark_dead(island_index=0)
    orphans = led.take_orphans()
    assert [o.candidate.candidate_id for o in orphans] == [ids[2]]
    assert led.take_orphans() == [] and len(led) == 0


def test_evaluations_finishing_after_the_death_are_orphans_and_the_new_incarnation_is_not():
    led = Ledger()
    led.seen(origin="old", island_index=1)
    led.seen(origin="other-island", island_index=2)
    led.mark_dead(island_index=1)
    led.seen(origin="new", island_index=1)
    for origin, i in (("old", 1), ("new", 2), ("other-island", 3)):
        cid, s = _settled(i, island=1 if origin != "other-island" else 2)
        led.file(origin=origin, submitted_id=cid, settled=s)
    orphans = led.take_orphans()
    assert [o.candidate.source for o in orphans] == ["# 1"]
    assert len(led) == 2


def test_the_final_hand_over_takes_what_live_islands_had_not_handed_over():
    led = Ledger()
    led.seen(origin="live", island_index=0)
    cid, s = _settled(7)
    led.file(origin="live", submitted_id=cid, settled=s)
    assert led.take_orphans() == []
    assert [o.candidate.candidate_id for o in led.take_orphans(every_origin=True)] == [cid]
    assert len(led) == 0
