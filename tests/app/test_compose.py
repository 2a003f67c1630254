"""Hydra composition and config validation (no Ray)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module

from foundry.config_keys import ConfigError
from foundry.run import settings_from

ROOT = Path(__file__).resolve().parents[2]


def _compose(*overrides):
    with initialize_config_module(config_module="foundry.conf", version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


def test_default_and_experiments_compose_and_validate():
    s = settings_from(_compose())
    assert s.ray.address is None and s.budget.evaluations == 200 and s.resume is None
    kb = settings_from(_compose("+exp=kernelbench"))
    assert kb.raw["tasks"]["level"] == 1 and kb.raw["llm"]["provider"] == "none"
    smoke = settings_from(_compose("+exp=smoke", "island.count=3", "ray.address=auto"))
    assert smoke.raw["tasks"]["path"] == "benchmarks/smoke" and smoke.raw["island"]["count"] == 3
    assert smoke.ray.address == "auto"


@pytest.mark.parametrize("override, named", [
    ("ray.num_cpus=abc", "ray.num_cpus"),
    ("budget.evaluations=-3", "budget.evaluations"),
    ("run.progress=fancy", "run.progress"),
    ("island.count=0", "island.count"),
    ("tasks.profile=huge", "tasks.profile"),
])
def test_bad_values_are_named(override, named):
    with pytest.raises((ConfigError, ValueError), match=named.replace(".", r"\.")):
        settings_from(_compose(override))


def test_unknown_group_key_is_named():
    with pytest.raises(ConfigError, match=r"unknown key 'ray\.bogus'; allowed: address, num_cpus, "):
        settings_from(_compose("+ray.bogus=1"))


def test_unknown_top_level_key_is_named():
    with pytest.raises(ConfigError, match=r"unknown key 'bogus'; allowed: tasks, llm, "):
        settings_from(_compose("+bogus=1"))


def _cli(*args):
    env = {**os.environ, "HYDRA_FULL_ERROR": "0"}
    return subprocess.run([sys.executable, "-m", "foundry", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_bad_override_fails_at_start_with_a_message_naming_it(tmp_path):
    out = _cli("ray.num_cpus=abc", f"hydra.run.dir={tmp_path}/r")
    assert out.returncode == 2
    assert "ray.num_cpus" in out.stderr and "Traceback" not in out.stderr
    out = _cli("budget.evaluatons=5", f"hydra.run.dir={tmp_path}/r2")
    assert out.returncode != 0 and "evaluatons" in out.stderr


def test_a_folder_that_holds_a_run_is_not_run_into_again(tmp_path):
    """A second session there would mix its evaluations with the first's: resume it or
    pick another folder; the run's files are left as they were."""
    held = tmp_path / "held"
    held.mkdir()
    (held / "run.json").write_text('{"sessions": [{"started": 1}]}')
    out = _cli(f"hydra.run.dir={held}", "budget.evaluations=1")
    assert out.returncode == 2, out.stderr[-2000:]
    assert f"resume={held}" in out.stderr and "Traceback" not in out.stderr
    assert (held / "run.json").read_text() == '{"sessions": [{"started": 1}]}'


def test_conf_is_found_after_a_non_editable_install(tmp_path):
    """`pip install .` into a throwaway target (no deps), then compose from outside the
    checkout: the config package travels with the wheel."""
    target = tmp_path / "site"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                          "--target", str(target), str(ROOT)], capture_output=True, text=True, timeout=300)
    if pip.returncode != 0 and "bdist_wheel" in pip.stderr + pip.stdout:
        pytest.skip("no wheel package to build with")
    assert pip.returncode == 0, pip.stderr[-2000:]
    assert (target / "foundry" / "conf" / "config.yaml").exists()
    assert (target / "foundry" / "conf" / "exp" / "kernelbench.yaml").exists()
    env = {**os.environ, "PYTHONPATH": str(target)}
    out = subprocess.run([sys.executable, "-c", (
        "import foundry.conf, foundry.run, sys\n"
        "assert foundry.conf.__file__.startswith(sys.argv[1]), foundry.conf.__file__\n"
        "assert foundry.run.__file__.startswith(sys.argv[1]), foundry.run.__file__\n"
        "from hydra import compose, initialize_config_module\n"
        "with initialize_config_module(config_module='foundry.conf', version_base='1.3'):\n"
        "    c = compose(config_name='config', overrides=['+exp=kernelbench'])\n"
        "print(c.tasks.level, c.ray.address)"), str(target)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["1", "None"]
