"""IslandConfig: every knob of the island search, validated once at start.

Built from the Hydra group `island` (conf/island/default.yaml) with
`IslandConfig.from_config(mapping)`, which rejects unknown keys and bad values with a
message that names them.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from foundry.config_keys import ConfigError, checked_keys

TOPOLOGIES = ("ring", "bidirectional_ring", "all_to_all", "none")

# Extra descriptor axes a config may add, each a static feature of the source
# (see islands.descriptors.source_features), binned by declared edges.
EXTRA_FEATURES = ("source_lines", "kernel_count", "tunable_count")


@dataclass(frozen=True)
class IslandConfig:
    """The island search's settings (paper defaults).

    count: number of islands. migration_interval: an island sends emigrants every this
    many of its own generations; migration_fraction: the top fraction of its (non-migrant)
    elites it sends; topology: where they go. exploration/exploitation/random weights:
    the parent-selection mix (normalised). softmax_temperature: exploitation's softmax
    over elite fitness. num_inspirations: elites from other cells shown with the parent.
    extra_axes: {feature name: increasing bin edges}, appended to the three level axes.
    """

    count: int = 4
    migration_interval: int = 10
    migration_fraction: float = 0.1
    topology: str = "ring"
    exploration_weight: float = 0.2
    exploitation_weight: float = 0.7
    random_weight: float = 0.1
    softmax_temperature: float = 1.0
    num_inspirations: int = 3
    extra_axes: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        def bad(key: str, why: str) -> ConfigError:
            return ConfigError(f"island.{key}: {why} (got {getattr(self, key)!r})")

        for key in ("count", "migration_interval", "num_inspirations"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, int):
                raise bad(key, "must be an integer")
        if self.count < 1:
            raise bad("count", "must be at least 1")
        if self.migration_interval < 1:
            raise bad("migration_interval", "must be at least 1")
        if self.num_inspirations < 0:
            raise bad("num_inspirations", "must be 0 or more")
        for key in ("migration_fraction", "exploration_weight", "exploitation_weight",
                    "random_weight", "softmax_temperature"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise bad(key, "must be a finite number")
        if not 0.0 < self.migration_fraction <= 1.0:
            raise bad("migration_fraction", "must be in (0, 1]")
        for key in ("exploration_weight", "exploitation_weight", "random_weight"):
            if getattr(self, key) < 0:
                raise bad(key, "must not be negative")
        if self.exploration_weight + self.exploitation_weight + self.random_weight <= 0:
            raise bad("exploitation_weight", "the three selection weights sum to zero")
        if self.softmax_temperature <= 0:
            raise bad("softmax_temperature", "must be positive")
        if self.topology not in TOPOLOGIES:
            raise bad("topology", f"must be one of {', '.join(TOPOLOGIES)}")
        if not isinstance(self.extra_axes, Mapping):
            raise bad("extra_axes", "must be a mapping {feature: [edges]}")
        clean: dict[str, tuple[float, ...]] = {}
        for name, edges in self.extra_axes.items():
            if name not in EXTRA_FEATURES:
                raise ConfigError(f"island.extra_axes: unknown feature {name!r}; "
                                  f"allowed: {', '.join(EXTRA_FEATURES)}")
            try:
                vals = tuple(float(e) for e in edges)
            except (TypeError, ValueError):
                raise ConfigError(f"island.extra_axes.{name}: edges must be numbers, "
                                  f"got {edges!r}") from None
            if not vals or any(not math.isfinite(v) for v in vals) or any(
                    b <= a for a, b in zip(vals, vals[1:])):
                raise ConfigError(f"island.extra_axes.{name}: edges must be a non-empty, "
                                  f"strictly increasing list of finite numbers, got {edges!r}")
            clean[str(name)] = vals
        object.__setattr__(self, "extra_axes", clean)

    @property
    def selection_weights(self) -> tuple[float, float, float]:
        """(exploration, exploitation, random), normalised to sum to 1."""
        total = self.exploration_weight + self.exploitation_weight + self.random_weight
        return (self.exploration_weight / total, self.exploitation_weight / total,
                self.random_weight / total)

    @classmethod
    def from_config(cls, mapping: Mapping[str, Any] | None) -> "IslandConfig":
        """Build from a mapping (a dict or an OmegaConf node); unknown keys are rejected."""
        mapping = checked_keys(cls, mapping, group="island")
        if "extra_axes" in mapping and mapping["extra_axes"] is None:
            mapping["extra_axes"] = {}
        for key in ("migration_fraction", "exploration_weight", "exploitation_weight",
                    "random_weight", "softmax_temperature"):
            if isinstance(mapping.get(key), int) and not isinstance(mapping.get(key), bool):
                mapping[key] = float(mapping[key])
        return cls(**mapping)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["extra_axes"] = {k: list(v) for k, v in self.extra_axes.items()}
        return d
