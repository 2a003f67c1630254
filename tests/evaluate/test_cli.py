"""The CLI contract: exit codes, the --json last line, one-line usage errors, scrubbing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RELU = str(ROOT / "benchmarks" / "smoke" / "relu.py")
CANDS = ROOT / "tests" / "exploits" / "candidates"
SECRET = "sk-cli-secret-9876543210"


def run(*args, env_extra=None, tmp=None):
    env = {**os.environ, **(env_extra or {})}
    if tmp is not None:
        env["FOUNDRY_CACHE_DIR"] = str(tmp)
    return subprocess.run([sys.executable, "-m", "foundry.evaluate", *args], capture_output=True,
                          text=True, env=env, timeout=240, cwd=ROOT)


@pytest.mark.parametrize("args", [
    [],
    ["/nonexistent/task.py", str(CANDS / "honest_relu_c.py")],
    [str(CANDS / "honest_relu_c.py"), str(CANDS / "honest_relu_c.py")],  # not a task
    [RELU, "/nonexistent/cand.py"],
    [RELU, str(CANDS / "honest_relu_c.py"), "--trials", "0"],
])
def test_bad_usage_exits_2_with_one_line(args):
    p = run(*args)
    assert p.returncode == 2, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and p.stderr.startswith("error:")


def test_json_verdicts_exit_0_whatever_the_verdict(tmp_path):
    ok = run(RELU, str(CANDS / "honest_relu_c.py"), "--json", "--trials", "2", "--no-compile-baseline",
             tmp=tmp_path)
    assert ok.returncode == 0, ok.stderr
    v = json.loads(ok.stdout.strip().splitlines()[-1])
    for key in ("correct", "stage", "flags", "runtime_ms", "baseline_ms", "speedup", "error"):
        assert key in v
    assert v["correct"] is True and v["stage"] == "correct" and v["flags"] == []
    assert v["runtime_ms"] > 0 and v["baseline_ms"] > 0
    assert v["speedup"] == pytest.approx(v["baseline_ms"] / v["runtime_ms"])

    bad = run(RELU, str(CANDS / "exploit_input_mutation.py"), "--json", "--trials", "2", tmp=tmp_path)
    assert bad.returncode == 0
    v = json.loads(bad.stdout.strip().splitlines()[-1])
    assert v["correct"] is False and v["stage"] == "value" and "input_mutation" in v["flags"]
    assert v["speedup"] is None


def test_text_mode_and_allow_torch_ops(tmp_path):
    p = run(RELU, str(CANDS / "honest_pure_torch.py"), "--allow-torch-ops", "--no-compile-baseline",
            "--trials", "2", tmp=tmp_path)
    assert p.returncode == 0 and p.stdout.startswith("CORRECT")


@pytest.mark.parametrize("isolation", ["none", "auto"])
def test_secrets_are_scrubbed_from_cli_output(tmp_path, isolation):
    p = run(RELU, str(CANDS / "exploit_env_leak.py"), "--json", "--isolation", isolation, tmp=tmp_path,
            env_extra={"SERVICE_API_KEY": SECRET, "GH_TOKEN": SECRET + "-gh"})
    assert p.returncode == 0
    assert "sk-cli-secret" not in p.stdout + p.stderr
    v = json.loads(p.stdout.strip().splitlines()[-1])
    assert v["stage"] == "compile" and "leaking" in v["error"]
    if isolation == "none":  # it can read the judge's environment: the values are scrubbed
        assert "[redacted]" in v["error"]


def test_a_candidate_that_is_not_text_is_a_syntax_verdict(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_bytes(b"\xff\xfe\x00 not text")
    p = run(RELU, str(bad), "--json", tmp=tmp_path)
    assert p.returncode == 0
    v = json.loads(p.stdout.strip().splitlines()[-1])
    assert v["stage"] == "syntax" and v["correct"] is False and "UTF-8" in v["error"]
