"""Calls to actors that never block the driver past a deadline: wait for a group of
calls at most so long, or take one call's value (None when it failed or has not
answered). Shared by every part of the driver's runtime (actors.supervisor and its
pieces)."""

from __future__ import annotations

import logging
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayError

log = logging.getLogger("foundry.run")


def ready_refs(refs: list, timeout: float | None) -> list:
    """The refs whose value is ready after waiting for all of them `timeout` s at most."""
    if not refs:
        return []
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout)
    return ready


def value_or_none(ref: Any, *, timeout: float | None = 0.0) -> Any:
    """The value of a Ray call, or None when it failed or had not answered in `timeout`."""
    try:
        return ray.get(ref, timeout=timeout)
    except (GetTimeoutError, RayActorError) as e:  # not answered yet, or the actor is gone
        log.debug("an actor call did not answer: %s", e)
        return None
    except RayError as e:  # the method itself failed
        log.warning("an actor call failed: %s", str(e).strip().splitlines()[-1][:300] if str(e).strip() else e)
        return None
