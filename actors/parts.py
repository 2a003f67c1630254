"""Where the runtime builds the parts it wraps: evaluator, proposer, islands, prompt
evolver, and the config validation of their groups. Keeping every constructor call in
one module keeps the actors thin and the contracts in one place.

`impl` arguments ("module:factory") replace a part by a stand-in (benchmarks, tests);
the shipped configuration leaves them null and gets the real parts.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any, Callable, Mapping


def load_impl(spec: str) -> Callable[..., Any]:
    module, _, attr = spec.partition(":")
    if not module or not attr:
        raise ValueError(f"implementation {spec!r} must look like 'package.module:factory'")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"cannot load implementation {spec!r}: {e}") from None


def make_evaluator(eval_config: Mapping[str, Any], *, impl: str | None = None, gate: Any = None,
                   backend: str | None = None) -> Any:
    """The judge (or a stand-in, which gets no gate); `gate`: the DeviceGate its lanes share;
    `backend`: the run's, whose modules its warm worker imports as it starts."""
    if impl:
        return load_impl(impl)(config=dict(eval_config))
    from foundry.evaluate import EvalConfig, Evaluator
    return Evaluator(config=EvalConfig.from_config(dict(eval_config)), gate=gate,
                     backends=(backend,) if backend else ())


def device_ceilings(device: str) -> tuple[Any, str]:
    """(the GPU's measured copy bandwidth and FLOP rate as DeviceCeilings, "") for results'
    roofline positions, measured once per machine and cached (foundry.hardware); (None,
    why) on a CPU or where they cannot be had."""
    if device != "cuda":
        return None, "no roofline on the CPU"
    try:
        from foundry import hardware
        return hardware.ceilings(hardware.describe()), ""
    except Exception as e:  # noqa: BLE001 - positions are a report: the run goes on without them
        return None, f"no ceilings: {type(e).__name__}: {e}"[:300]


def make_device_gate(device: str, *, lanes: int) -> Any:
    """The gate an evaluator's lanes share; on a GPU it lets them reserve together at most
    90% of the device's memory."""
    from foundry.evaluate.device_gate import DeviceGate
    from foundry.evaluate.task_size import available_bytes
    capacity = int(0.9 * available_bytes(device)) if device == "cuda" and lanes > 1 else 0
    return DeviceGate(capacity_bytes=capacity)


def make_proposer(*, llm: Mapping[str, Any], templates: Mapping[str, Any],
                  on_llm_call: Callable[[Any], None], seed: int, island_index: int,
                  island_count: int = 1, impl: str | None = None) -> Any:
    """The LLM proposer when `llm.provider` is not none, else the template engine.

    Each island process holds its own LLM client, so each gets an equal share of the
    run's LLM budget (`island_count` shares): together they never exceed it."""
    if impl:
        return load_impl(impl)(llm=dict(llm), templates=dict(templates), seed=seed,
                               island_index=island_index, on_llm_call=on_llm_call)
    from foundry.llm import LLMConfig, LLMProposer
    llm_config = LLMConfig.from_config(dict(llm))
    if llm_config.enabled:
        if island_count > 1:
            llm_config = dataclasses.replace(llm_config, budget=llm_config.budget.share(island_count))
        return LLMProposer(llm_config, on_call=on_llm_call)
    from foundry.templates import TemplateConfig, TemplateProposer
    return TemplateProposer(config=TemplateConfig.from_config(dict(templates)))


def island_seed(seed: int, island_index: int, task_id: str) -> int:
    from foundry.types import content_hash
    return int(content_hash(f"{seed}/{island_index}/{task_id}"), 16) % (2**31)


def make_island(*, island: Mapping[str, Any], island_index: int, task_id: str, seed: int) -> Any:
    from islands import Island, IslandConfig
    return Island(island_id=island_index, task_id=task_id, config=IslandConfig.from_config(dict(island)),
                  seed=island_seed(seed, island_index, task_id))


def validate_groups(groups: Mapping[str, Mapping[str, Any]], *, skip: tuple = ()) -> dict[str, Any]:
    """Build every group's config object (the owners' `from_config`), so a bad key or
    value fails at start; returns {group: config object}."""
    builders: dict[str, Callable[[Mapping], Any]] = {}

    def add(group: str, module: str, cls: str) -> None:
        def build(mapping: Mapping) -> Any:
            try:
                config_cls = getattr(importlib.import_module(module), cls)
            except (ImportError, AttributeError) as e:
                raise ValueError(f"{group}: cannot check this group, {module}.{cls} is missing ({e})") from None
            return config_cls.from_config(dict(mapping))
        builders[group] = build

    add("evaluator", "foundry.evaluate", "EvalConfig")
    add("island", "islands", "IslandConfig")
    add("llm", "foundry.llm", "LLMConfig")
    add("prompt", "foundry.llm", "PromptEvolutionConfig")
    add("tasks", "foundry.tasks.suite", "SuiteConfig")
    add("templates", "foundry.templates.config", "TemplateConfig")
    out = {}
    for group, build in builders.items():
        if group in skip or group not in groups:
            continue
        out[group] = build(groups[group])
    return out
