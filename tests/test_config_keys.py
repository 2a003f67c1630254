"""The shared config checks: plain mappings, unknown keys, numbers, one ConfigError."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from omegaconf import OmegaConf

from foundry.config_keys import ConfigError, check_known, checked_keys, checked_number, plain_mapping


@dataclass(frozen=True)
class _Group:
    alpha: int = 1
    beta: str = "b"


def test_config_error_is_a_value_error():
    assert issubclass(ConfigError, ValueError)


def test_plain_mapping_accepts_none_dicts_and_omegaconf():
    assert plain_mapping(None) == {}
    assert plain_mapping({"a": 1}) == {"a": 1}
    node = OmegaConf.create({"a": 1, "b": "${a}", "c": {"d": [1, 2]}})
    out = plain_mapping(node, "g")
    assert out == {"a": 1, "b": 1, "c": {"d": [1, 2]}} and type(out) is dict and type(out["c"]) is dict


@pytest.mark.parametrize("value", [3, "x", [1, 2], OmegaConf.create([1, 2])])
def test_plain_mapping_rejects_a_non_mapping_naming_where(value):
    with pytest.raises(ConfigError, match=r"^ray\.runtime_env: expected a mapping, got "):
        plain_mapping(value, "ray.runtime_env")
    with pytest.raises(ConfigError, match=r"^config: expected a mapping"):
        plain_mapping(value)


def test_unknown_keys_are_named_dotted_with_the_allowed_ones():
    check_known(["alpha"], ("alpha", "beta"), group="g")
    with pytest.raises(ConfigError, match=r"^unknown key 'ray\.bogus'; allowed: alpha, beta$"):
        check_known(["alpha", "bogus"], ("alpha", "beta"), group="ray")
    with pytest.raises(ConfigError, match=r"^unknown keys 'ray\.x', 'ray\.y'; allowed: alpha, beta$"):
        check_known(["x", "alpha", "y"], ("alpha", "beta"), group="ray")


def test_top_level_keys_are_named_bare():
    with pytest.raises(ConfigError, match=r"^unknown key 'bogus'; allowed: tasks, seed$"):
        check_known({"bogus": 1, "seed": 0}, ("tasks", "seed"), group="")


def test_checked_keys_checks_the_dataclass_fields():
    assert checked_keys(_Group, OmegaConf.create({"alpha": 2}), group="g") == {"alpha": 2}
    assert checked_keys(_Group, None, group="g") == {}
    with pytest.raises(ConfigError, match=r"^unknown key 'g\.gamma'; allowed: alpha, beta$"):
        checked_keys(_Group, {"gamma": 1}, group="g")
    with pytest.raises(ConfigError, match=r"^g: expected a mapping, got int"):
        checked_keys(_Group, 5, group="g")


def test_checked_number():
    assert checked_number(2, "x") == 2.0 and isinstance(checked_number(2, "x"), float)
    assert checked_number(3.0, "x", integer=True) == 3 and isinstance(checked_number(3.0, "x", integer=True), int)
    assert checked_number(None, "x", allow_none=True) is None
    assert checked_number(0, "x") == 0.0
    assert checked_number(1, "x", minimum=1, integer=True) == 1
    for value, kw, msg in [
        (None, {}, r"x must be a number, got None"),
        (True, {}, r"x must be a number, got True"),
        ("1", {}, r"x must be a number, got '1'"),
        (2.5, {"integer": True}, r"x must be an integer, got 2\.5"),
        (-1, {}, r"x must be >= 0\.0, got -1"),
        (0, {"minimum": 1, "integer": True}, r"x must be >= 1, got 0"),
        (0, {"strict": True}, r"x must be > 0\.0, got 0"),
        (float("nan"), {}, r"x must be >= 0\.0, got nan"),
    ]:
        with pytest.raises(ConfigError, match=f"^{msg}$"):
            checked_number(value, "x", **kw)
