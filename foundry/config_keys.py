"""The one home of config checking: `ConfigError`, turning a config node into a plain
dict, rejecting keys a group does not declare, and checking a number.

Every message names the key as written on the command line (`ray.num_cpus`), so a bad
override can be found and fixed from the message alone.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Iterable, Mapping, Sequence


class ConfigError(ValueError):
    """A config key or value is wrong; the message names it as written on the command
    line, e.g. `ray.num_cpus`."""


def plain_mapping(value: Any, where: str = "config") -> dict[str, Any]:
    """`value` as a plain dict: None -> {}, an OmegaConf DictConfig -> its resolved
    plain containers, any Mapping -> a dict; anything else is a ConfigError naming `where`."""
    if value is None:
        return {}
    try:
        from omegaconf import DictConfig, OmegaConf
        if isinstance(value, DictConfig):
            value = OmegaConf.to_container(value, resolve=True)
    except ImportError:  # pragma: no cover - omegaconf is a dependency
        pass
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: expected a mapping, got {type(value).__name__}")
    return dict(value)


def check_known(keys: Iterable[str], allowed: Sequence[str], *, group: str) -> None:
    """Raise ConfigError naming every key of `keys` not in `allowed`, dotted under `group`
    ('ray.bogus'; just 'bogus' when `group` is ""), and listing the allowed ones."""
    unknown = [k for k in dict.fromkeys(keys) if k not in allowed]
    if unknown:
        names = ", ".join(repr(f"{group}.{k}" if group else str(k)) for k in unknown)
        raise ConfigError(f"unknown key{'s' if len(unknown) > 1 else ''} {names}; "
                          f"allowed: {', '.join(allowed)}")


def checked_keys(cls: type, mapping: Any, *, group: str) -> dict[str, Any]:
    """`mapping` as a plain dict, after checking every key is a field of dataclass `cls`
    (see `check_known`)."""
    data = plain_mapping(mapping, group or "config")
    check_known(data, [f.name for f in dataclasses.fields(cls)], group=group)
    return data


def checked_number(value: Any, where: str, *, minimum: float = 0.0, allow_none: bool = False,
                   integer: bool = False, strict: bool = False) -> float | int | None:
    """`value` as a float (an int with `integer`) at least `minimum` (above it with
    `strict`); None passes with `allow_none`; else ConfigError naming `where`."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{where} must be a number, got {value!r}")
    if integer and not float(value).is_integer():
        raise ConfigError(f"{where} must be an integer, got {value!r}")
    if math.isnan(value) or value < minimum or (strict and value == minimum):
        bound = f"> {minimum}" if strict else f">= {minimum}"
        raise ConfigError(f"{where} must be {bound}, got {value!r}")
    return int(value) if integer else float(value)
