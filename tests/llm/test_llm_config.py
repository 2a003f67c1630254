"""LLM and prompt-evolution configs: the shipped YAML files load; bad keys are named."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from foundry.llm import ConfigError, LLMClient, LLMConfig, PromptEvolutionConfig, make_proposer
from foundry.llm.accounting import endpoint_of, scrub

CONF = Path(__file__).resolve().parents[2] / "conf"


@pytest.mark.parametrize("name", ["none", "openai", "vllm", "llamacpp"])
def test_shipped_llm_configs_load(name):
    cfg = OmegaConf.load(CONF / "llm" / f"{name}.yaml")
    if name == "vllm":
        cfg.model = "Qwen/Qwen2.5-Coder-32B-Instruct"
    llm = LLMConfig.from_config(cfg)
    assert llm.provider == name and llm.enabled == (name != "none")
    if name == "openai":
        assert llm.api_key_env == "OPENAI_API_KEY" and llm.price_for("gpt-4.1").output == 8.0
        assert llm.budget.max_cost_usd == 20.0


def test_none_means_no_proposer():
    assert make_proposer(LLMConfig.from_config({"provider": "none"})) is None
    with pytest.raises(ConfigError, match="none"):
        LLMClient(LLMConfig())


def test_vllm_without_model_is_rejected():
    cfg = OmegaConf.load(CONF / "llm" / "vllm.yaml")
    with pytest.raises(ConfigError, match="llm.model is required"):
        LLMConfig.from_config(cfg)


def test_prompt_config_loads_and_rejects_bad_values():
    p = PromptEvolutionConfig.from_config(OmegaConf.load(CONF / "prompt" / "default.yaml"))
    assert p.selection == "ucb" and len(p.edit_strategies) == 5 and p.edit_every == 20
    with pytest.raises(ConfigError, match=r"unknown key 'prompt\.selecton'; allowed: selection, "):
        PromptEvolutionConfig.from_config({"selecton": "ucb"})
    with pytest.raises(ConfigError, match="unknown strategy 'mutate'"):
        PromptEvolutionConfig.from_config({"edit_strategies": ["mutate"]})
    with pytest.raises(ConfigError, match="prompt.temperature"):
        PromptEvolutionConfig.from_config({"temperature": 0})


@pytest.mark.parametrize("data, match", [
    ({"provider": "openai", "modle": "x"}, r"unknown key 'llm\.modle'; allowed: provider, base_url"),
    ({"provider": "groq"}, "llm.provider must be one of"),
    ({"provider": "vllm", "model": "m", "base_url": "http://h/v1", "timeout_s": 0}, "llm.timeout_s"),
    ({"provider": "vllm", "model": "m", "base_url": "http://h/v1", "budget": {"max_call": 3}},
     r"unknown key 'llm\.budget\.max_call'; allowed: max_calls, "),
    ({"provider": "vllm", "model": "m", "base_url": "http://h/v1",
      "ensemble": [{"model": "a", "weight": 0}]}, r"llm.ensemble\[0\].weight"),
    ({"provider": "vllm", "model": "m", "base_url": "http://h/v1",
      "prices": {"m": {"inptu": 1}}}, r"unknown key 'llm\.prices\.m\.inptu'; allowed: input, output"),
    ({"provider": "vllm", "model": "m"}, "llm.base_url is required"),
    ({"provider": "vllm", "model": "m", "base_url": "http://h/v1", "max_tokens": "many"},
     "llm.max_tokens must be a number"),
])
def test_bad_llm_config_names_the_key(data, match):
    with pytest.raises(ConfigError, match=match):
        LLMConfig.from_config(data)


def test_openai_without_key_fails_at_start(monkeypatch):
    monkeypatch.delenv("FOUNDRY_NO_SUCH_KEY", raising=False)
    cfg = LLMConfig.from_config({"provider": "openai", "model": "gpt-4.1-mini",
                                 "api_key_env": "FOUNDRY_NO_SUCH_KEY"})
    with pytest.raises(ConfigError, match="FOUNDRY_NO_SUCH_KEY"):
        LLMClient(cfg)


def test_scrub_and_endpoint_hide_secrets():
    assert endpoint_of("https://user:pw@example.com:8443/v1?k=1") == "https://example.com:8443"
    line = scrub("auth failed for sk-abcdefghijklmnop and token XYZSECRET\nnext", ["XYZSECRET"])
    assert "sk-abc" not in line and "XYZSECRET" not in line and "\n" not in line


@pytest.mark.parametrize("overrides, provider, model", [
    ([], "none", ""),
    (["llm=openai", "llm.model=gpt-4.1"], "openai", "gpt-4.1"),
    (["llm=vllm", "llm.base_url=http://gpu-host:8000/v1", "llm.model=Qwen/Qwen2.5-Coder-32B-Instruct"],
     "vllm", "Qwen/Qwen2.5-Coder-32B-Instruct"),
    (["llm=llamacpp", "llm.base_url=http://127.0.0.1:8080/v1"], "llamacpp", "local"),
])
def test_hydra_composition_of_llm_and_prompt_groups(overrides, provider, model):
    if not (CONF / "config.yaml").exists():
        pytest.skip("conf/config.yaml (the top-level config) is not there yet")
    from hydra import compose, initialize_config_dir
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        cfg = compose(config_name="config", overrides=overrides)
    llm = LLMConfig.from_config(cfg.llm)
    assert (llm.provider, llm.model) == (provider, model)
    assert PromptEvolutionConfig.from_config(cfg.prompt).selection == "ucb"
