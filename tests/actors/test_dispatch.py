"""The dispatcher's balancing, re-queueing and budget logic (pure asyncio, no Ray)."""

from __future__ import annotations

import asyncio

import pytest

from actors.dispatch import Balancer, EvaluationLost, Refused, WorkerLost, WorkerUnavailable


def worker(name, delay, log, fail_first=0):
    state = {"fails": fail_first}

    async def call(payload):
        await asyncio.sleep(delay)
        if state["fails"]:
            state["fails"] -= 1
            raise WorkerLost(f"{name} died")
        log.append((name, payload))
        return payload * 10
    return call


async def test_balances_by_speed_and_returns_results():
    log = []
    b = Balancer()
    b.add_worker("fast", worker("fast", 0.001, log), slots=1)
    b.add_worker("slow", worker("slow", 0.02, log), slots=1)
    results = await asyncio.gather(*(b.submit(i) for i in range(40)))
    assert results == [i * 10 for i in range(40)]
    done = {n: sum(1 for w, _ in log if w == n) for n in ("fast", "slow")}
    assert done["fast"] > 3 * done["slow"] > 0
    await b.aclose()


async def test_items_submitted_first_go_ahead_of_the_others_each_kind_in_order():
    """One busy slot; while it works, tuning items (not first) and first kernels queue up
    interleaved: when it frees, every item submitted first is taken before any other."""
    log = []
    b = Balancer()
    b.add_worker("w", worker("w", 0.005, log), slots=1)
    busy = asyncio.ensure_future(b.submit(0))
    await asyncio.sleep(0.001)  # the slot has taken item 0
    rest = [asyncio.ensure_future(b.submit(i, first=i % 2 == 1)) for i in range(1, 9)]
    await asyncio.gather(busy, *rest)
    assert [p for _, p in log] == [0, 1, 3, 5, 7, 2, 4, 6, 8]
    await b.aclose()


async def test_a_requeued_item_keeps_its_place_among_the_first():
    log = []
    b = Balancer(retry_delay_s=0.01)
    b.add_worker("w", worker("w", 0.005, log, fail_first=1), slots=1)
    first = asyncio.ensure_future(b.submit(1, first=True))
    await asyncio.sleep(0.001)
    later = [asyncio.ensure_future(b.submit(i)) for i in (2, 3)]
    assert await first == 10 and [await f for f in later] == [20, 30]
    assert [p for _, p in log] == [1, 2, 3]  # lost once, taken again before the others
    await b.aclose()


async def test_a_slot_waiting_with_nothing_queued_counts_as_starved():
    log = []
    b = Balancer()
    b.add_worker("w", worker("w", 0.001, log), slots=2)
    await asyncio.sleep(0.05)  # both slots wait: nothing is queued yet
    await asyncio.gather(b.submit(1), b.submit(2))
    starved = b.stats()["workers"]["w"]["starved_s"]
    assert 0.09 <= starved < 1.0  # two slots, about 0.05 s each
    busy_only = Balancer()
    busy_only.add_worker("w", worker("w", 0.001, log), slots=1)
    await asyncio.gather(*(busy_only.submit(i) for i in range(5)))  # queued before the slot first looks
    assert busy_only.stats()["workers"]["w"]["starved_s"] < 0.05
    await b.aclose()
    await busy_only.aclose()


async def test_work_of_a_lost_worker_is_requeued_to_another():
    log = []
    b = Balancer(retry_delay_s=0.05)
    b.add_worker("dies", worker("dies", 0.005, log, fail_first=3))
    b.add_worker("ok", worker("ok", 0.005, log))
    results = await asyncio.gather(*(b.submit(i) for i in range(20)))
    assert sorted(results) == [i * 10 for i in range(20)]
    assert sorted(p for _, p in log) == list(range(20))  # each item evaluated exactly once
    assert b.requeued == b.stats()["workers"]["dies"]["lost"] >= 1
    await b.aclose()


async def test_an_item_that_keeps_killing_workers_fails_after_max_attempts():
    async def always_dies(payload):
        raise WorkerLost("boom")
    b = Balancer(max_attempts=3, retry_delay_s=0.0)
    b.add_worker("a", always_dies)
    with pytest.raises(EvaluationLost, match="3 times"):
        await b.submit(1)
    await b.aclose()


async def test_an_evaluator_still_restarting_charges_the_item_no_loss(monkeypatch):
    """The item's one real loss (its evaluator died under it), then five refusals while the
    evaluator restarts: the item is not failed (max_attempts 3), it is judged once the
    evaluator is back; the worker waited longer in between, up to UNAVAILABLE_WAIT_S."""
    import actors.dispatch as dispatch
    waits = []
    real_sleep = asyncio.sleep

    async def sleep(s):
        waits.append(s)
        await real_sleep(0)

    monkeypatch.setattr(dispatch.asyncio, "sleep", sleep)
    calls = []

    async def restarting(payload):
        calls.append(payload)
        if len(calls) == 1:
            raise WorkerLost("ActorDiedError")
        if len(calls) <= 6:
            raise WorkerUnavailable("ActorUnavailableError, still restarting")
        return payload * 10

    b = Balancer(max_attempts=3, retry_delay_s=0.5)
    b.add_worker("a", restarting)
    assert await b.submit(7) == 70
    assert len(calls) == 7 and waits == [0.5, 1.0, 1.0, 1.0, 1.0, 1.0]
    assert b.stats()["workers"]["a"]["lost"] == 6
    await b.aclose()


async def test_budget_is_exact_and_per_key():
    log = []
    b = Balancer(budget=5, budget_per_key=2)
    b.add_worker("w", worker("w", 0.0, log), slots=2)
    assert await b.submit(1, key="a") == 10
    assert await b.submit(2, key="a") == 20
    with pytest.raises(Refused) as r:
        await b.submit(3, key="a")
    assert r.value.scope == "key"
    outs = await asyncio.gather(*(b.submit(i, key=f"k{i}") for i in range(3)))
    assert len(outs) == 3
    with pytest.raises(Refused) as r:
        await b.submit(9, key="z")
    assert r.value.scope == "all" and "budget" in r.value.reason
    assert b.stats()["submitted"] == 5
    await b.aclose()


async def test_close_refuses_new_work():
    b = Balancer()
    b.add_worker("w", worker("w", 0.0, []))
    b.close("target reached", "t1")
    with pytest.raises(Refused, match="target reached"):
        await b.submit(1, key="t1")
    assert await b.submit(1, key="t2") == 10
    b.close("stopping")
    with pytest.raises(Refused, match="stopping"):
        await b.submit(1, key="t2")
    await b.aclose()


async def test_evaluator_errors_reach_the_submitter_and_the_worker_goes_on():
    calls = []

    async def flaky(payload):
        calls.append(payload)
        if payload == 1:
            raise RuntimeError("evaluator bug")
        return payload
    b = Balancer()
    b.add_worker("w", flaky)
    with pytest.raises(RuntimeError, match="evaluator bug"):
        await b.submit(1)
    assert await b.submit(2) == 2
    await b.aclose()


async def test_every_item_settles_once_even_when_its_submitter_is_gone():
    settled = []
    b = Balancer(retry_delay_s=0.01, max_attempts=1,
                 on_settle=lambda payload, value, error: settled.append((payload, value, type(error).__name__)))
    b.add_worker("w", worker("w", 0.01, [], fail_first=1), slots=1)
    lost = asyncio.ensure_future(b.submit(1))
    gone = asyncio.ensure_future(b.submit(2))
    await asyncio.sleep(0)
    gone.cancel()  # the submitter died; its item is still evaluated and settled
    with pytest.raises(EvaluationLost):
        await lost
    for _ in range(100):
        if len(settled) == 2:
            break
        await asyncio.sleep(0.01)
    assert sorted(settled) == [(1, None, "EvaluationLost"), (2, 20, "NoneType")]
    await b.aclose()


async def test_abandon_hands_back_what_is_queued_or_running_and_drops_its_late_results():
    settled = []
    release = asyncio.Event()

    async def slow(payload):
        await release.wait()
        return payload * 10
    b = Balancer(on_settle=lambda payload, value, error: settled.append(payload))
    b.add_worker("w", slow, slots=1)
    subs = [asyncio.ensure_future(b.submit(i)) for i in (1, 2)]
    await asyncio.sleep(0.01)  # 1 is being evaluated, 2 waits in the queue
    gone = b.abandon("wall-time budget spent")
    assert [(a.payload, a.worker) for a in gone] == [(1, "w"), (2, "")]
    assert gone[0].running_s >= 0 and gone[1].running_s is None
    for s in subs:
        with pytest.raises(Refused, match="wall-time budget") as r:
            await s
        assert r.value.scope == "all"
    release.set()
    await asyncio.sleep(0.01)
    assert settled == []  # the late result of 1 is dropped, 2 never runs
    assert [a.payload for a in b.abandon("again")] == [1, 2]  # the same list again
    with pytest.raises(Refused):
        await b.submit(3)
    assert b.stats()["abandoned"] == 2
    await b.aclose()
