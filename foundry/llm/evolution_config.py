"""Configuration of prompt evolution (the `prompt` config group)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping

from foundry.config_keys import ConfigError, checked_keys, checked_number

SELECTIONS = ("softmax", "ucb")
EDIT_STRATEGIES = ("improve", "specialise", "generalise", "simplify", "elaborate")


@dataclass(frozen=True)
class PromptEvolutionConfig:
    """How prompts are picked and how often the LLM edits one.

    `edit_every`: one LLM edit per this many outcome reports (0: never edit).
    Rewards: an outcome that improved on its parent earns `reward_improved`; a correct
    one that did not improve earns `reward_correct`; anything else earns 0.
    """

    selection: str = "ucb"
    temperature: float = 0.2  # softmax temperature over mean rewards
    usage_bonus: float = 0.1  # softmax: bonus / sqrt(1 + times selected)
    ucb_c: float = 0.5  # UCB exploration weight
    prior_reward: float = 0.25  # pseudo-observation that smooths the mean of new prompts
    reward_improved: float = 1.0
    reward_correct: float = 0.25
    edit_every: int = 20
    edit_strategies: tuple = EDIT_STRATEGIES
    max_population: int = 16
    min_uses_to_retire: int = 5
    max_section_chars: int = 2500
    builtin_variants: tuple = ()  # names under prompts/variants/; empty: all of them

    @classmethod
    def from_config(cls, mapping: Mapping | None) -> "PromptEvolutionConfig":
        data = checked_keys(cls, mapping, group="prompt")
        defaults = cls()
        selection = data.get("selection", defaults.selection)
        if selection not in SELECTIONS:
            raise ConfigError(f"prompt.selection must be one of {', '.join(SELECTIONS)}, "
                              f"got {selection!r}")
        strategies = tuple(data.get("edit_strategies") or EDIT_STRATEGIES)
        for s in strategies:
            if s not in EDIT_STRATEGIES:
                raise ConfigError(f"prompt.edit_strategies: unknown strategy {s!r} "
                                  f"(allowed: {', '.join(EDIT_STRATEGIES)})")
        values = {}
        for f in dataclasses.fields(cls):
            if f.name in ("selection", "edit_strategies", "builtin_variants"):
                continue
            default = getattr(defaults, f.name)
            integer = isinstance(default, int)
            minimum = 1.0 if f.name in ("max_population", "max_section_chars") else 0.0
            values[f.name] = checked_number(data.get(f.name, default), f"prompt.{f.name}",
                                            minimum=minimum, integer=integer,
                                            strict=f.name == "temperature")
        return cls(selection=selection, edit_strategies=strategies,
                   builtin_variants=tuple(data.get("builtin_variants") or ()), **values)
