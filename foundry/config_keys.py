"""Reading a config group into a frozen dataclass: one place that turns an OmegaConf node
into plain values and rejects keys the dataclass does not declare, naming them and the
allowed ones."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping


def plain_mapping(mapping: Mapping[str, Any] | None) -> dict[str, Any]:
    """A dict of plain values from a dict, a Mapping or an OmegaConf DictConfig."""
    if mapping is None:
        return {}
    if hasattr(mapping, "items") and not isinstance(mapping, dict):
        try:  # an OmegaConf DictConfig
            from omegaconf import OmegaConf
            return dict(OmegaConf.to_container(mapping, resolve=True))  # type: ignore[arg-type]
        except Exception:  # noqa: BLE001 - a plain Mapping
            return dict(mapping.items())
    return dict(mapping)


def checked_keys(cls: type, mapping: Mapping[str, Any] | None, *, group: str) -> dict[str, Any]:
    """`mapping` as a plain dict, after checking every key is a field of dataclass `cls`;
    raises ValueError naming the unknown keys of `group` and the allowed ones."""
    data = plain_mapping(mapping)
    allowed = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ValueError(f"unknown {group} config key(s) {', '.join(map(repr, unknown))}; "
                         f"allowed: {', '.join(sorted(allowed))}")
    return data
