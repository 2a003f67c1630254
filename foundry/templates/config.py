"""TemplateConfig: the `templates` config group (conf/templates/default.yaml)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from foundry.config_keys import checked_keys

FAMILIES = ("pointwise", "reduce", "softmax", "norm", "scan", "pool", "loss", "matmul", "conv")
MUTATIONS = ("params", "template", "fusion")


@dataclass(frozen=True)
class TemplateConfig:
    """enabled: use the template engine at all; families: op families templates may
    cover (a task needing another is "not covered"); mutations: what optimize mode may
    change (params: one TUNABLE value; template: the template choice, e.g. Triton
    matmul-with-epilogue vs torch matmul + fused chain; fusion: fuse or split a region's
    epilogue); tune_budget: measurements per candidate; tune_exhaustive_max: spaces up to
    this size are searched whole; tune_seed: sampling seed; tune_cache: JSON cache path
    (null: none); tune_repeat_budget: measurements per candidate whose parameter space
    was already measured on the task (null: half of tune_budget, at least 2);
    tune_uncovered: tune a task's candidates before the evaluator has a correct kernel
    for it (false, the default: until then each is judged once, at its own settings, so
    that every task gets a correct kernel sooner; tuning starts with the next ones)."""

    enabled: bool = True
    families: tuple = FAMILIES
    mutations: tuple = MUTATIONS
    tune_budget: int = 8
    tune_exhaustive_max: int = 32
    tune_seed: int = 0
    tune_cache: str | None = None
    tune_repeat_budget: int | None = None
    tune_uncovered: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "families", tuple(self.families))
        object.__setattr__(self, "mutations", tuple(self.mutations))
        bad = [f for f in self.families if f not in FAMILIES]
        if bad:
            raise ValueError(f"templates.families: unknown family {bad[0]!r} (choose from {', '.join(FAMILIES)})")
        bad = [m for m in self.mutations if m not in MUTATIONS]
        if bad:
            raise ValueError(f"templates.mutations: unknown mutation {bad[0]!r} (choose from {', '.join(MUTATIONS)})")
        if not self.mutations:
            raise ValueError("templates.mutations must name at least one mutation")
        for name in ("tune_budget", "tune_exhaustive_max"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"templates.{name} must be >= 1, got {getattr(self, name)!r}")

    @classmethod
    def from_config(cls, mapping: Mapping[str, Any] | None) -> "TemplateConfig":
        return cls(**checked_keys(cls, mapping, group="templates"))

    def tuner_config(self):
        from foundry.tuning.tuner import TunerConfig
        return TunerConfig(budget=self.tune_budget, exhaustive_max=self.tune_exhaustive_max,
                           seed=self.tune_seed, cache_path=self.tune_cache,
                           repeat_budget=self.tune_repeat_budget, tune_uncovered=bool(self.tune_uncovered))
