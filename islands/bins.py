"""Fixed, declared bins: the MAP-Elites grid.

A grid is a tuple of axes. A *level* axis holds small integers 0..n-1 (the descriptor
levels); an *edges* axis maps a number to a bin by declared edges (k edges, k+1 bins:
below the first edge is bin 0, at or above the last is bin k). Bins are declared once
and never move: no running min/max, no rescaling, so an elite's cell means the same
thing for the whole run and after a restart.
"""

from __future__ import annotations

import bisect
import itertools
import math
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence

LEVEL_AXES = ("memory", "compute", "parallelism")
NUM_LEVELS = 4


@dataclass(frozen=True)
class Axis:
    """One grid axis: `kind` is "level" (values 0..size-1) or "edges" (binned by `edges`)."""

    name: str
    kind: str
    size: int
    edges: tuple[float, ...] = ()

    @staticmethod
    def levels(*, name: str, count: int = NUM_LEVELS) -> "Axis":
        if count < 1:
            raise ValueError(f"axis {name!r}: level count must be at least 1, got {count}")
        return Axis(name=name, kind="level", size=count)

    @staticmethod
    def binned(*, name: str, edges: Sequence[float]) -> "Axis":
        vals = tuple(float(e) for e in edges)
        if not vals or any(not math.isfinite(v) for v in vals) or any(
                b <= a for a, b in zip(vals, vals[1:])):
            raise ValueError(f"axis {name!r}: edges must be non-empty, finite and strictly "
                             f"increasing, got {list(edges)!r}")
        return Axis(name=name, kind="edges", size=len(vals) + 1, edges=vals)

    def index(self, value: float) -> int:
        """The bin of `value`; a level outside 0..size-1 is an error, never clamped."""
        if self.kind == "level":
            if isinstance(value, bool) or int(value) != value or not 0 <= value < self.size:
                raise ValueError(f"axis {self.name!r}: level must be an integer in "
                                 f"0..{self.size - 1}, got {value!r}")
            return int(value)
        if not math.isfinite(value):
            raise ValueError(f"axis {self.name!r}: value must be finite, got {value!r}")
        return bisect.bisect_right(self.edges, value)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "size": self.size,
                "edges": list(self.edges)}

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> "Axis":
        if d["kind"] == "level":
            return Axis.levels(name=d["name"], count=int(d["size"]))
        if d["kind"] == "edges":
            return Axis.binned(name=d["name"], edges=d["edges"])
        raise ValueError(f"axis {d.get('name')!r}: unknown kind {d['kind']!r}")


@dataclass(frozen=True)
class Bins:
    """The grid: fixed axes; `cell(values)` maps one value per axis to a cell tuple."""

    axes: tuple[Axis, ...]

    def __post_init__(self) -> None:
        names = [a.name for a in self.axes]
        if not names:
            raise ValueError("a grid needs at least one axis")
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate axis names in {names}")

    @staticmethod
    def default(*, extra_axes: Mapping[str, Sequence[float]] | None = None) -> "Bins":
        """The paper's 4x4x4 grid (memory, compute, parallelism) plus any extra axes."""
        axes = [Axis.levels(name=n) for n in LEVEL_AXES]
        for name, edges in (extra_axes or {}).items():
            axes.append(Axis.binned(name=name, edges=edges))
        return Bins(axes=tuple(axes))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.axes)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(a.size for a in self.axes)

    @property
    def num_cells(self) -> int:
        return math.prod(self.shape)

    def cell(self, values: Sequence[float]) -> tuple[int, ...]:
        if len(values) != len(self.axes):
            raise ValueError(f"expected {len(self.axes)} values for axes {self.names}, "
                             f"got {len(values)}: {tuple(values)!r}")
        return tuple(a.index(v) for a, v in zip(self.axes, values))

    def check_cell(self, cell: Sequence[int]) -> tuple[int, ...]:
        """Validate a cell tuple (each index inside its axis)."""
        cell = tuple(cell)
        if len(cell) != len(self.axes) or any(
                isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < a.size
                for a, i in zip(self.axes, cell)):
            raise ValueError(f"cell {cell!r} is not in the grid of shape {self.shape}")
        return cell

    def all_cells(self) -> Iterator[tuple[int, ...]]:
        return itertools.product(*(range(a.size) for a in self.axes))

    def to_dict(self) -> dict[str, Any]:
        return {"axes": [a.to_dict() for a in self.axes]}

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> "Bins":
        return Bins(axes=tuple(Axis.from_dict(a) for a in d["axes"]))
