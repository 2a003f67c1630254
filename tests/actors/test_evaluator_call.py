"""The dispatcher's call to an evaluator actor across the actor's restart: the call it was
running when the actor died is a loss (WorkerLost); calls while the actor restarts are
refused as WorkerUnavailable, which charges the item nothing (actors.dispatch)."""

from __future__ import annotations

import pytest
from ray.exceptions import ActorDiedError, ActorUnavailableError

from actors.dispatch import WorkerLost, WorkerUnavailable
from actors.dispatcher_actor import evaluator_call


class Method:
    """An actor method whose `.remote()` answers each call with the next of `outcomes`
    (an exception is raised when awaited)."""

    def __init__(self, outcomes: list):
        self.outcomes, self.calls = list(outcomes), 0

    def remote(self, *args, **kwargs):
        self.calls += 1
        outcome = self.outcomes.pop(0)

        async def answer():
            if isinstance(outcome, BaseException):
                raise outcome
            return outcome
        return answer()


class Handle:
    def __init__(self, evaluate: list, ready: list):
        self.evaluate, self.__ray_ready__ = Method(evaluate), Method(ready)


def unavailable() -> ActorUnavailableError:
    return ActorUnavailableError("the actor is restarting", None)


async def test_calls_while_the_actor_restarts_are_unavailable_not_lost():
    handle = Handle(evaluate=[ActorDiedError(), "judged"], ready=[unavailable(), unavailable(), True])
    call = evaluator_call(handle, lambda: False)
    with pytest.raises(WorkerLost) as died:
        await call(("task", "candidate", "origin"))
    assert not isinstance(died.value, WorkerUnavailable)  # it was running on the actor: a loss
    for _ in range(2):
        with pytest.raises(WorkerUnavailable, match="still restarting"):
            await call(("task", "candidate", "origin"))
    assert handle.evaluate.calls == 1  # no work was sent to the restarting actor
    assert await call(("task", "candidate", "origin")) == "judged"
    assert handle.__ray_ready__.calls == 3 and handle.evaluate.calls == 2


async def test_a_live_actor_is_not_asked_whether_it_is_ready():
    handle = Handle(evaluate=["one", "two"], ready=[])
    call = evaluator_call(handle, lambda: True)
    assert [await call(("t", "c", "o")), await call(("t", "c", "o"))] == ["one", "two"]
    assert handle.__ray_ready__.calls == 0
