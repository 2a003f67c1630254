import dataclasses
import pathlib

import pytest
from omegaconf import OmegaConf

from islands import Bins, ConfigError, IslandConfig

DEFAULT_YAML = pathlib.Path(__file__).parents[2] / "conf" / "island" / "default.yaml"


def test_default_yaml_mirrors_the_dataclass_and_its_defaults():
    data = OmegaConf.to_container(OmegaConf.load(DEFAULT_YAML), resolve=True)
    assert set(data) == {f.name for f in dataclasses.fields(IslandConfig)}
    assert IslandConfig.from_config(data) == IslandConfig()


def test_paper_defaults():
    cfg = IslandConfig()
    assert (cfg.count, cfg.migration_interval, cfg.migration_fraction, cfg.topology) == (
        4, 10, 0.1, "ring")
    assert cfg.selection_weights == pytest.approx((0.2, 0.7, 0.1))


def test_unknown_key_is_rejected_with_its_name_and_the_allowed_keys():
    with pytest.raises(ConfigError, match=r"unknown key 'island\.migration_intervall'; allowed: .*"
                                          r"migration_interval"):
        IslandConfig.from_config({"migration_intervall": 5})


@pytest.mark.parametrize("key,value,needle", [
    ("count", 0, "count"), ("count", 2.5, "count"), ("migration_interval", 0, "interval"),
    ("migration_fraction", 0.0, "fraction"), ("migration_fraction", 1.5, "fraction"),
    ("topology", "star", "topology"), ("exploration_weight", -0.1, "exploration_weight"),
    ("softmax_temperature", 0, "temperature"), ("num_inspirations", -1, "inspirations"),
    ("extra_axes", {"lines": [1, 2]}, "unknown feature 'lines'"),
    ("extra_axes", {"source_lines": [50, 20]}, "strictly increasing"),
])
def test_bad_values_name_the_key(key, value, needle):
    with pytest.raises(ConfigError, match=needle):
        IslandConfig.from_config({key: value})


def test_all_zero_weights_rejected():
    with pytest.raises(ConfigError, match="sum to zero"):
        IslandConfig.from_config({"exploration_weight": 0, "exploitation_weight": 0,
                                  "random_weight": 0})


def test_extra_axes_become_fixed_grid_axes():
    cfg = IslandConfig.from_config({"extra_axes": {"source_lines": [40, 80, 160]}})
    bins = Bins.default(extra_axes=cfg.extra_axes)
    assert bins.names == ("memory", "compute", "parallelism", "source_lines")
    assert bins.shape == (4, 4, 4, 4)
    assert IslandConfig.from_config(cfg.to_dict()) == cfg


def test_an_omegaconf_node_is_accepted_as_hydra_passes_it():
    node = OmegaConf.load(DEFAULT_YAML)
    node.extra_axes = {"kernel_count": [2, 3]}
    node.topology = "all_to_all"
    cfg = IslandConfig.from_config(dict(node))
    assert cfg.topology == "all_to_all" and cfg.extra_axes == {"kernel_count": (2.0, 3.0)}
