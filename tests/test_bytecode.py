"""foundry.bytecode: a Python told not to write bytecode still compiles each module once."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = "import foundry.evaluate.evaluator, sys; print(sys.pycache_prefix or '')"


def _run(tmp_path, **env):
    full = {**os.environ, "PYTHONPATH": str(ROOT), "FOUNDRY_CACHE_DIR": str(tmp_path),
            "PYTHONDONTWRITEBYTECODE": "1", **env}
    full.pop("PYTHONPYCACHEPREFIX", None)
    out = subprocess.run([sys.executable, "-c", PROBE], env=full, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_bytecode_goes_to_the_cache_root_when_python_writes_none(tmp_path):
    prefix = _run(tmp_path)
    assert prefix == str(tmp_path / "pycache")
    written = list((tmp_path / "pycache").rglob("*.pyc"))
    names = {p.name.split(".")[0] for p in written}
    assert "evaluator" in names and "protocol" in names  # the judge's own modules, torch's too
    assert any("torch" in p.parts for p in written)


def test_bytecode_cache_can_be_turned_off(tmp_path):
    assert _run(tmp_path, FOUNDRY_BYTECODE_CACHE="0") == ""
    assert not (tmp_path / "pycache").exists()


def test_the_bytecode_folder_is_not_a_build_cache_a_candidate_may_write():
    from foundry.kernels import BUILD_CACHES
    assert "pycache" not in BUILD_CACHES
