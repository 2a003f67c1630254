"""Default tile parameters of the matrix-product and convolution templates."""

from __future__ import annotations


def default_first(value, choices: list) -> list:
    """`choices` with `value` first (a TUNABLE list's first entry is its default)."""
    return [value] + [c for c in choices if c != value]


def fitted_first(size: int, choices: list) -> list:
    """`choices` with `block_for(size, choices)` first: the default tile for a dim of `size`."""
    return default_first(block_for(size, choices), choices)


def block_for(size: int, choices: list) -> int:
    """The default tile extent for a dim of `size`: the first choice, or the smallest one
    covering a smaller dim."""
    fits = sorted(c for c in choices if c >= size)
    return min(choices[0], fits[0]) if fits else choices[0]
