from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from foundry.config_keys import ConfigError
from foundry.evaluate import EvalConfig

CONF = Path(__file__).resolve().parents[2] / "conf" / "evaluator" / "default.yaml"


def test_defaults_and_overrides():
    cfg = EvalConfig.from_config({"device": "cpu", "trials": 3, "secret_env_names": ["X"]})
    assert cfg.trials == 3 and cfg.secret_env_names == ("X",)
    assert cfg.speedup_recheck_threshold == 10.0 and cfg.compile_baseline is True


def test_unknown_key_is_named_with_the_allowed_ones():
    with pytest.raises(ConfigError, match=r"unknown key 'evaluator\.trails'; allowed: .*trials"):
        EvalConfig.from_config({"trails": 3})


@pytest.mark.parametrize("bad", [{"device": "tpu"}, {"trials": 0}, {"timeout_s": 0}, {"compile_mode": "fastest"}])
def test_bad_values_are_rejected(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        EvalConfig.from_config(bad)


def test_hydra_group_file_mirrors_the_dataclass():
    data = yaml.safe_load(CONF.read_text())
    cfg = EvalConfig.from_config(data)
    import dataclasses
    assert set(data) == {f.name for f in dataclasses.fields(EvalConfig)}
    assert cfg.baseline_cache_dir  # null falls back to the default directory


def test_omegaconf_node_is_accepted():
    from omegaconf import OmegaConf
    cfg = EvalConfig.from_config(OmegaConf.create({"trials": 2, "secret_env_names": ["A"]}))
    assert cfg.trials == 2 and cfg.secret_env_names == ("A",)
