"""foundry.bytecode: a Python told not to write bytecode, over packages that ship none,
still compiles each module once; where packages ship bytecode nothing changes."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(tmp_path, probe: str, **env):
    (tmp_path / "site" / "nopyc").mkdir(parents=True, exist_ok=True)  # a package shipped without bytecode
    (tmp_path / "site" / "nopyc" / "__init__.py").write_text("VALUE = 1\n")
    full = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path / "site")]),
            "FOUNDRY_CACHE_DIR": str(tmp_path / "cache"), "PYTHONDONTWRITEBYTECODE": "1", **env}
    full.pop("PYTHONPYCACHEPREFIX", None)
    out = subprocess.run([sys.executable, "-c", probe], env=full, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_bytecode_goes_to_the_cache_root_when_packages_ship_none(tmp_path):
    probe = ("from foundry.bytecode import keep_bytecode; import sys; p = keep_bytecode(sample='nopyc'); "
             "import foundry.evaluate.evaluator, nopyc; print(p, sys.pycache_prefix)")
    prefix, in_use = _run(tmp_path, probe).split()
    assert prefix == in_use == str(tmp_path / "cache" / "pycache")
    written = list((tmp_path / "cache" / "pycache").rglob("*.pyc"))
    assert {"evaluator", "protocol"} <= {p.name.split(".")[0] for p in written}
    assert any("nopyc" in p.parts and p.name.startswith("__init__.") for p in written)
    assert not (tmp_path / "site" / "nopyc" / "__pycache__").exists()  # the package itself untouched


def test_packages_with_their_own_bytecode_are_left_as_they_are(tmp_path):
    # this environment's torch was installed with its bytecode (pip compiles it)
    probe = ("import sys, foundry.evaluate.evaluator; from foundry.bytecode import installed_bytecode; "
             "print(installed_bytecode('torch'), sys.pycache_prefix)")
    assert _run(tmp_path, probe) == "True None"
    assert not (tmp_path / "cache" / "pycache").exists()


def test_bytecode_cache_can_be_turned_off(tmp_path):
    probe = "from foundry.bytecode import keep_bytecode; print(keep_bytecode(sample='nopyc'))"
    assert _run(tmp_path, probe, FOUNDRY_BYTECODE_CACHE="0") == "None"
    assert not (tmp_path / "cache" / "pycache").exists()


def test_the_bytecode_folder_is_not_a_build_cache_a_candidate_may_write():
    from foundry.kernels import BUILD_CACHES
    assert "pycache" not in BUILD_CACHES
