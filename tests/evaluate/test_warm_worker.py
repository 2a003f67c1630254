"""The warm worker's handle: torch-free, so the CLI can start it before importing torch."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import sys
from foundry.evaluate.config import EvalConfig
from foundry.evaluate.warm_worker import warm_worker_for
w = warm_worker_for(EvalConfig.from_config({"device": "cuda", "threads": 3}), backends=("triton",))
assert "torch" not in sys.modules, "torch imported"
assert w.env["OMP_NUM_THREADS"] == "3" and w.env["PYTHONDONTWRITEBYTECODE"] == "1"
assert "CUBLAS_WORKSPACE_CONFIG" not in w.env and w.env["FOUNDRY_TF32"] == "off"  # it slows cuBLAS launches
assert w.preload[:2] == ("foundry.kernels", "foundry.kernels.c") and "triton" in w.preload
print("ok")
"""


def test_the_warm_workers_handle_imports_no_torch():
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_secrets_stay_out_of_the_warm_workers_environment(monkeypatch):
    from foundry.evaluate.config import EvalConfig
    from foundry.evaluate.warm_worker import warm_worker_for
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-for-candidates")
    env = warm_worker_for(EvalConfig.from_config({"device": "cpu"})).env
    assert "OPENAI_API_KEY" not in env and env["TRITON_INTERPRET"] == "1"



def test_the_warm_worker_imports_the_judges_code_when_only_the_judges_sys_path_has_it(monkeypatch):
    # e.g. a benchmark run from a checkout that is not installed: its judge imports foundry
    # through sys.path, and its warm worker (a new interpreter) needs the folder on PYTHONPATH
    from foundry.evaluate.config import EvalConfig
    from foundry.evaluate.warm_worker import importable_path, warm_worker_for
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    env = warm_worker_for(EvalConfig.from_config({"device": "cpu"})).env
    assert env["PYTHONPATH"] == f"{ROOT}:/elsewhere"
    assert importable_path("") == str(ROOT)
    assert importable_path(f"/elsewhere:{ROOT}") == f"{ROOT}:/elsewhere"  # once, first
