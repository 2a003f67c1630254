"""Pattern: one recognisable coding technique that puts a kernel at some level of an axis.

The per-backend tables (patterns_triton, patterns_cuda, patterns_c) list them. A pattern
matches when its regex (if any) finds a match in its scope of the source ("kernel": the
kernel code, "host": the Python around it, "all": both) and every name in `requires`
matched too (a name "a|b" is satisfied by either; names starting with "@" are facts the
analyser computes, e.g. "@single_kernel"). A kernel's level on an axis is the highest
level among the patterns that matched on that axis, 0 when none did.

`within`: a second regex that must match inside group 1 of some match of `regex` (two
cheap scans instead of one backtracking one). `needles` are plain substrings one of which occurs on the first line of every match;
the analyser skips the regex when none occurs and otherwise starts the scan at the line
of the earliest one (substring search is far faster than a regex scan).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

AXES = ("memory", "compute", "parallelism")

# What each level means (the paper's axes), 0-based.
LEVEL_NAMES = {
    "memory": ("naive global access", "coalesced / vectorised access",
               "shared-memory tiling", "register blocking + async copy"),
    "compute": ("multi-pass", "fused", "single-pass / streaming", "tiled / flash-style"),
    "parallelism": ("thread-only", "block barriers", "warp intrinsics", "hierarchical"),
}
SCOPES = ("kernel", "host", "all")


@dataclass(frozen=True)
class Pattern:
    name: str
    axis: str
    level: int
    regex: str | None = None
    scope: str = "kernel"
    requires: tuple[str, ...] = ()
    needles: tuple[str, ...] = ()  # the regex runs only if one of these substrings occurs
    within: str | None = None  # if set, must match inside group 1 of a match of `regex`
    flags: int = re.M
    compiled: re.Pattern | None = field(default=None, compare=False, repr=False)
    compiled_within: re.Pattern | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.axis not in AXES:
            raise ValueError(f"pattern {self.name!r}: unknown axis {self.axis!r}")
        if not 1 <= self.level <= 3:
            raise ValueError(f"pattern {self.name!r}: level must be 1..3, got {self.level}")
        if self.scope not in SCOPES:
            raise ValueError(f"pattern {self.name!r}: scope must be one of {SCOPES}")
        if self.regex is None and not self.requires:
            raise ValueError(f"pattern {self.name!r}: needs a regex or requirements")
        if self.regex is not None:
            object.__setattr__(self, "compiled", re.compile(self.regex, self.flags))
        elif self.needles or self.within:
            raise ValueError(f"pattern {self.name!r}: needles/within without a regex")
        if self.within is not None:
            object.__setattr__(self, "compiled_within", re.compile(self.within, self.flags))

    def search(self, text: str) -> bool:
        """Whether the regex part matches `text` (requirements are checked elsewhere)."""
        if self.compiled is None:
            return True
        start = 0
        if self.needles:
            first = -1
            for needle in self.needles:
                i = text.find(needle)
                if i >= 0 and (first < 0 or i < first):
                    first = i
            if first < 0:
                return False
            start = text.rfind("\n", 0, first) + 1  # matches start on a needle's line
        if self.compiled_within is None:
            return self.compiled.search(text, start) is not None
        return any(self.compiled_within.search(m.group(1))
                   for m in self.compiled.finditer(text, start))


@dataclass(frozen=True)
class PatternTable:
    """A backend's patterns plus, per axis, how each level is reached in that backend."""

    backend: str
    patterns: tuple[Pattern, ...]
    advice: dict  # axis -> 4 strings, one per level

    def __post_init__(self) -> None:
        names = [p.name for p in self.patterns]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"{self.backend}: duplicate pattern names {sorted(dup)}")
        for axis in AXES:
            if len(self.advice.get(axis, ())) != 4:
                raise ValueError(f"{self.backend}: advice for {axis!r} needs 4 entries")
