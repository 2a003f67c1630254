"""What the tuner has already measured of each parameter space, so a later candidate with
the same space on the same task is screened on fewer settings: its own, the fastest seen
so far, and settings not yet tried, instead of the same seeded sample again.

One instance may be shared by the lanes of an evaluator (their tuners run in threads):
every method holds a lock. Kept in memory only: a new run explores afresh."""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass
from typing import Iterable

from foundry.tuning.space import size


@dataclass(frozen=True)
class SpaceKey:
    """A parameter space as one task's candidates of one backend declare it, on one device."""

    task_id: str
    task_hash: str
    backend: str
    device: str
    space: tuple  # ((name, (values...)), ...) sorted by name

    @classmethod
    def of(cls, *, task_id: str, task_hash: str, backend: str, device: str, tunable: dict) -> "SpaceKey":
        return cls(task_id, task_hash, backend, device,
                   tuple((name, tuple(repr(v) for v in tunable[name])) for name in sorted(tunable)))


def _combo(params: dict, names: list[str]) -> tuple:
    return tuple(repr(params.get(name)) for name in names)


class ExploredPoints:
    """Per parameter space: the settings measured so far with their fastest runtime, and
    how many tunings measured it (`record`); the settings of its next tuning (`plan`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # space -> {combo (reprs by sorted name): (fastest runtime ms seen, params)}
        self._seen: dict[SpaceKey, dict[tuple, tuple[float, dict]]] = {}
        self._screens: dict[SpaceKey, int] = {}

    def screens(self, key: SpaceKey) -> int:
        """How many measurements of this space were recorded (0: a first tuning)."""
        with self._lock:
            return self._screens.get(key, 0)

    def record(self, key: SpaceKey, measured: Iterable[tuple[dict, float | None]]) -> None:
        """Settings measured together (one screen, or one tuning's evaluations): each with
        its runtime in ms, or None where it failed. Failures are not kept (a failure may be
        the judge's, not the setting's: the setting may be drawn again), and a tuning with
        no setting measured does not count as one."""
        names = [name for name, _ in key.space]
        ok = [(params, float(ms)) for params, ms in measured if ms and ms > 0]
        if not ok:
            return
        with self._lock:
            seen = self._seen.setdefault(key, {})
            for params, ms in ok:
                combo = _combo(params, names)
                if combo not in seen or ms < seen[combo][0]:
                    seen[combo] = (ms, dict(params))
            self._screens[key] = self._screens.get(key, 0) + 1

    def plan(self, key: SpaceKey, *, tunable: dict, start: dict, limit: int, seed: int) -> list[dict]:
        """At most `limit` settings for a repeat tuning of the space: `start` first, then
        the fastest setting seen, then settings never measured (a sample drawn with `seed`
        and the number of earlier tunings, so each tuning draws new ones), then the next
        fastest seen."""
        names = sorted(tunable)
        with self._lock:
            seen = dict(self._seen.get(key, {}))
            rounds = self._screens.get(key, 0)
        ranked = [params for _, params in sorted(seen.values(), key=lambda entry: entry[0])]
        planned: list[dict] = []
        taken: set[tuple] = set()

        def take(params: dict) -> None:
            combo = _combo(params, names)
            if combo not in taken and len(planned) < limit:
                taken.add(combo)
                planned.append(dict(params))

        take(start)
        if ranked:
            take(ranked[0])
        rng = random.Random(seed * 1_000_003 + rounds)
        unseen = size(tunable) - len(seen)  # settings never measured
        tries = 0
        while (len(planned) < limit and sum(1 for c in taken if c not in seen) < unseen
               and tries < 50 * limit):
            tries += 1
            params = {name: rng.choice(tunable[name]) for name in names}
            if _combo(params, names) not in seen:
                take(params)
        for params in ranked[1:]:
            take(params)
        return planned
