"""A candidate's declared parameter space (`TUNABLE`) and how to walk it."""

from __future__ import annotations

import ast
import itertools
import random
from typing import Iterator


class SpaceError(ValueError):
    """TUNABLE is missing, not a literal, or not a dict of non-empty lists."""


def read_tunable(source: str) -> dict:
    """The module-level `TUNABLE = {...}` literal of a candidate source ({} when absent)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise SpaceError(f"the candidate does not parse ({e.msg}, line {e.lineno})") from None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "TUNABLE" for t in node.targets):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                raise SpaceError("TUNABLE must be a literal dict of lists") from None
            if not isinstance(value, dict) or not all(isinstance(v, (list, tuple)) and v for v in value.values()):
                raise SpaceError("TUNABLE must map each parameter name to a non-empty list of values")
            return {str(k): list(v) for k, v in value.items()}
    return {}


def defaults(tunable: dict) -> dict:
    return {k: v[0] for k, v in tunable.items()}


def size(tunable: dict) -> int:
    n = 1
    for v in tunable.values():
        n *= len(v)
    return n


def points(tunable: dict, *, limit: int, exhaustive_max: int, seed: int, start: dict | None = None) -> Iterator[dict]:
    """Parameter settings to try: every point when the space has at most
    `exhaustive_max` (and `limit`) points, else `limit` distinct points sampled with
    `seed`. The defaults (or `start`) come first."""
    names = sorted(tunable)
    first = dict(defaults(tunable), **(start or {}))
    yield first
    seen = {tuple(first[k] for k in names)}
    total = size(tunable)
    if total <= min(exhaustive_max, limit):
        for combo in itertools.product(*(tunable[k] for k in names)):
            if combo not in seen:
                seen.add(combo)
                yield dict(zip(names, combo))
        return
    rng = random.Random(seed)
    tries = 0
    while len(seen) < min(limit, total) and tries < 50 * limit:
        tries += 1
        combo = tuple(rng.choice(tunable[k]) for k in names)
        if combo not in seen:
            seen.add(combo)
            yield dict(zip(names, combo))
