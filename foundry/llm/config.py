"""Configuration of the LLM client: endpoint, sampling, retries, ensemble, prices, budgets.

Every config object is a frozen dataclass built by `from_config(mapping)`, which rejects
unknown keys with a message naming the key and listing the allowed ones. The API key is
never part of the config: `api_key_env` names the environment variable that holds it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from foundry.config_keys import ConfigError, checked_keys, checked_number, plain_mapping

PROVIDERS = ("none", "openai", "vllm", "llamacpp", "compatible")
KEYLESS_PLACEHOLDER = "no-key"  # the openai package insists on a key; local servers ignore it


@dataclass(frozen=True)
class EnsembleMember:
    """One model of an ensemble; `base_url`/`api_key_env` default to the top-level ones."""

    model: str
    weight: float = 1.0
    base_url: str | None = None
    api_key_env: str | None = None

    @classmethod
    def from_config(cls, mapping: Mapping, *, where: str = "llm.ensemble[]") -> "EnsembleMember":
        data = checked_keys(cls, mapping, group=where)
        if not data.get("model") or not isinstance(data["model"], str):
            raise ConfigError(f"{where}.model must be a non-empty string")
        weight = checked_number(data.get("weight", 1.0), f"{where}.weight", strict=True)
        return cls(model=data["model"], weight=weight, base_url=data.get("base_url"),
                   api_key_env=data.get("api_key_env"))


@dataclass(frozen=True)
class ModelPrice:
    """US dollars per one million tokens."""

    input: float = 0.0
    output: float = 0.0

    @classmethod
    def from_config(cls, mapping: Mapping, *, where: str) -> "ModelPrice":
        data = checked_keys(cls, mapping, group=where)
        return cls(input=checked_number(data.get("input", 0.0), f"{where}.input"),
                   output=checked_number(data.get("output", 0.0), f"{where}.output"))

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input + completion_tokens * self.output) / 1e6


@dataclass(frozen=True)
class BudgetConfig:
    """Limits for the whole run; None means unlimited. `max_concurrency` bounds the
    requests in flight at once (it throttles, it never ends the run)."""

    max_calls: int | None = None
    max_tokens: int | None = None
    max_cost_usd: float | None = None
    max_wall_s: float | None = None
    max_concurrency: int = 32

    @classmethod
    def from_config(cls, mapping: Mapping | None, *, where: str = "llm.budget") -> "BudgetConfig":
        data = checked_keys(cls, mapping, group=where)
        return cls(
            max_calls=checked_number(data.get("max_calls"), f"{where}.max_calls", allow_none=True, integer=True),
            max_tokens=checked_number(data.get("max_tokens"), f"{where}.max_tokens", allow_none=True, integer=True),
            max_cost_usd=checked_number(data.get("max_cost_usd"), f"{where}.max_cost_usd", allow_none=True),
            max_wall_s=checked_number(data.get("max_wall_s"), f"{where}.max_wall_s", allow_none=True),
            max_concurrency=checked_number(data.get("max_concurrency", 32), f"{where}.max_concurrency",
                                           minimum=1, integer=True),
        )


    def share(self, parts: int) -> "BudgetConfig":
        """This budget split evenly over `parts` independent clients (e.g. one per island
        process), so that together they never exceed it; the wall-time limit is shared
        as is. Calls and tokens round down (a part may get none)."""
        if parts < 1:
            raise ConfigError(f"cannot share an LLM budget over {parts} parts")

        def split(v, integer):
            if v is None:
                return None
            return int(v) // parts if integer else v / parts
        return BudgetConfig(max_calls=split(self.max_calls, True),
                            max_tokens=split(self.max_tokens, True),
                            max_cost_usd=split(self.max_cost_usd, False),
                            max_wall_s=self.max_wall_s,
                            max_concurrency=max(1, self.max_concurrency // parts))


@dataclass(frozen=True)
class LLMConfig:
    """The `llm` config group. `provider: none` means no LLM client is made."""

    provider: str = "none"
    base_url: str | None = None
    model: str = ""
    api_key_env: str | None = None
    temperature: float | None = 0.7  # None: not sent (models that reject it)
    max_tokens: int = 8192
    timeout_s: float = 120.0
    max_retries: int = 3
    backoff_base_s: float = 1.0
    backoff_max_s: float = 30.0
    max_retry_after_s: float = 60.0
    send_seed: bool = False
    extra_body: dict = field(default_factory=dict)
    ensemble: tuple = ()  # tuple of EnsembleMember; empty: the single `model`
    prices: dict = field(default_factory=dict)  # model -> ModelPrice
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    reply_format: str = "auto"  # auto | full | diff
    max_source_chars: int = 200_000

    @property
    def enabled(self) -> bool:
        return self.provider != "none"

    def members(self) -> tuple:
        """The ensemble, or the single configured model as a one-member ensemble."""
        return self.ensemble or (EnsembleMember(model=self.model, weight=1.0),)

    def price_for(self, model: str) -> ModelPrice:
        return self.prices.get(model, ModelPrice())

    @classmethod
    def from_config(cls, mapping: Mapping | None) -> "LLMConfig":
        data = checked_keys(cls, mapping, group="llm")
        data = {k: (None if v == "???" else v) for k, v in data.items()}  # Hydra's MISSING
        provider = data.get("provider", "none")
        if provider not in PROVIDERS:
            raise ConfigError(f"llm.provider must be one of {', '.join(PROVIDERS)}, got {provider!r}")
        ensemble = tuple(
            EnsembleMember.from_config(m, where=f"llm.ensemble[{i}]")
            for i, m in enumerate(data.get("ensemble") or ()))
        prices = {str(k): ModelPrice.from_config(v, where=f"llm.prices.{k}")
                  for k, v in plain_mapping(data.get("prices"), "llm.prices").items()}
        reply_format = data.get("reply_format", "auto")
        if reply_format not in ("auto", "full", "diff"):
            raise ConfigError(f"llm.reply_format must be auto, full or diff, got {reply_format!r}")
        cfg = cls(
            provider=provider,
            base_url=data.get("base_url"),
            model=str(data.get("model") or ""),
            api_key_env=data.get("api_key_env"),
            temperature=checked_number(data.get("temperature", 0.7), "llm.temperature", allow_none=True),
            max_tokens=checked_number(data.get("max_tokens", 8192), "llm.max_tokens", minimum=1, integer=True),
            timeout_s=checked_number(data.get("timeout_s", 120.0), "llm.timeout_s", strict=True),
            max_retries=checked_number(data.get("max_retries", 3), "llm.max_retries", integer=True),
            backoff_base_s=checked_number(data.get("backoff_base_s", 1.0), "llm.backoff_base_s"),
            backoff_max_s=checked_number(data.get("backoff_max_s", 30.0), "llm.backoff_max_s"),
            max_retry_after_s=checked_number(data.get("max_retry_after_s", 60.0), "llm.max_retry_after_s"),
            send_seed=bool(data.get("send_seed", False)),
            extra_body=plain_mapping(data.get("extra_body"), "llm.extra_body"),
            ensemble=ensemble,
            prices=prices,
            budget=BudgetConfig.from_config(data.get("budget")),
            reply_format=reply_format,
            max_source_chars=checked_number(data.get("max_source_chars", 200_000), "llm.max_source_chars",
                                            minimum=1, integer=True),
        )
        if cfg.enabled:
            if not cfg.ensemble and not cfg.model:
                raise ConfigError(f"llm.model is required for provider {provider!r} "
                                  "(or give llm.ensemble)")
            if not cfg.base_url and provider != "openai":
                raise ConfigError(f"llm.base_url is required for provider {provider!r}")
        return cfg
