"""Backend helpers that candidate files import.

This package must never import the evaluator (`foundry.evaluate`): a candidate can reach
everything it imports, and the judge has to stay out of its reach.

Every backend helper calls `record_launch` when a compiled kernel of its backend is
invoked, so the evaluator can check that the candidate's own kernels actually ran.
"""

from __future__ import annotations

import collections
from pathlib import Path

from foundry.paths import cache_root

_launches: collections.Counter = collections.Counter()


def record_launch(backend: str, name: str) -> None:
    """Count one launch of kernel `name` of `backend` in this process."""
    _launches[(backend, name)] += 1


def launches() -> dict:
    """A copy of the launch counts, {(backend, kernel_name): count}."""
    return dict(_launches)


def reset_launches() -> None:
    _launches.clear()


# the build caches a sandboxed candidate may write (each keyed by what it builds); the
# judge's own caches (baselines, degeneracy, its compiler caches) are not among them
BUILD_CACHES = ("c", "cuda", "cuda_inline", "triton")


def cache_dir(kind: str) -> Path:
    """Per-backend build cache: <cache root>/<kind> (foundry.paths)."""
    path = cache_root() / kind
    path.mkdir(parents=True, exist_ok=True)
    return path
