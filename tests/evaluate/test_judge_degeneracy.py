"""The judge's degeneracy verdict: computed once and cached on disk (a second call, also
from another process, does not run the reference), keyed by tolerance and sizes; the
user's overrides (EvalConfig.degenerate_ok, a task file's DEGENERATE_OK) skip the check;
the shared JSON cache behind it and the baseline cache."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from foundry.evaluate import EvalConfig
from foundry.evaluate.baselines import Baseline, BaselineCache
from foundry.evaluate.degeneracy import (Degeneracy, declared_degenerate_ok, degeneracy_key,
                                         judge_degeneracy)
from foundry.evaluate.disk_cache import JsonDiskCache
from foundry.tasks.loader import load_task

ROOT = Path(__file__).resolve().parents[2]

# forward appends one character to CALLS, so the tests can count reference runs
TASK = '''import torch
import torch.nn as nn

CALLS = {calls!r}
{extra}

class Model(nn.Module):
    def forward(self, x):
        with open(CALLS, "a") as f:
            f.write(".")
        return {body}


def get_inputs():
    return [torch.randn(32, 32)]


def get_init_inputs():
    return []
'''


def _task(tmp_path: Path, name: str, body: str, extra: str = ""):
    calls = tmp_path / f"{name}.calls"
    path = tmp_path / f"{name}.py"
    path.write_text(TASK.format(calls=str(calls), body=body, extra=extra))
    return load_task(path), calls


def _runs(calls: Path) -> int:
    return len(calls.read_text()) if calls.exists() else 0


def test_the_verdict_is_cached_on_disk_across_calls_and_processes(tmp_path):
    task, calls = _task(tmp_path, "const", "torch.zeros_like(x) + 3.0")
    cache = tmp_path / "cache"
    first = judge_degeneracy(task, device="cpu", atol=None, rtol=None, cache_dir=str(cache))
    assert first.degenerate and "one value repeated (3)" in first.reason and not first.cached
    n = _runs(calls)
    assert n >= 4  # three input sets and one swap
    again = judge_degeneracy(task, device="cpu", atol=None, rtol=None, cache_dir=str(cache))
    assert again.cached and _runs(calls) == n  # the reference did not run again
    assert (again.degenerate, again.reason, again.details) == (first.degenerate, first.reason, first.details)
    code = ("import sys; from foundry.tasks.loader import load_task; "
            "from foundry.evaluate.degeneracy import judge_degeneracy; "
            f"d = judge_degeneracy(load_task({str(task.path)!r}), device='cpu', atol=None, rtol=None, "
            f"cache_dir={str(cache)!r}); print(d.cached, d.degenerate)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.stdout.split() == ["True", "True"], out.stderr[-2000:]
    assert _runs(calls) == n
    # another tolerance or size is another verdict
    loose = judge_degeneracy(task, device="cpu", atol=1e-2, rtol=None, cache_dir=str(cache))
    assert not loose.cached and _runs(calls) > n
    keys = {degeneracy_key(task, device="cpu", overrides=o, atol=a, rtol=None)
            for o, a in [(None, None), (None, 1e-2), ({"x": 1}, None)]}
    assert len(keys) == 3
    assert degeneracy_key(task, device="cuda", overrides=None, atol=None, rtol=None) not in keys


def test_a_healthy_task_is_cached_as_not_degenerate(tmp_path):
    task, calls = _task(tmp_path, "tanh", "torch.tanh(x)")
    d = judge_degeneracy(task, device="cpu", atol=None, rtol=None, cache_dir=str(tmp_path / "c"))
    assert isinstance(d, Degeneracy) and not d.degenerate and d.reason == "" and d.details["best_excess"] > 10
    record = json.loads(next((tmp_path / "c").glob("*.json")).read_text())
    assert record["degenerate"] is False and record["task_id"] == task.task_id


def test_the_users_list_overrides_the_check(tmp_path):
    task, calls = _task(tmp_path, "const", "torch.zeros_like(x) + 3.0")
    d = judge_degeneracy(task, device="cpu", atol=None, rtol=None, cache_dir=str(tmp_path / "c"),
                         degenerate_ok=("other", "con*"))
    assert not d.degenerate and d.override == "EvalConfig.degenerate_ok lists 'con*'"
    assert _runs(calls) == 0  # the check did not run
    cfg = EvalConfig.from_config({"degenerate_ok": ["level1/94_MSELoss"]})
    assert cfg.degenerate_ok == ("level1/94_MSELoss",)
    assert EvalConfig.from_config({"degenerate_ok": None}).degenerate_ok == ()
    with pytest.raises(ValueError, match="degenerate_ok must be a list of task ids"):
        EvalConfig(degenerate_ok=[3])
    with pytest.raises(ValueError, match="list of task ids"):
        judge_degeneracy(task, device="cpu", atol=None, rtol=None, cache_dir=str(tmp_path / "c"),
                         degenerate_ok="const")


def test_the_task_file_overrides_the_check(tmp_path):
    why = "a scalar loss over a large batch: near-constant by design"
    task, calls = _task(tmp_path, "declared", "torch.zeros_like(x) + 3.0", extra=f"DEGENERATE_OK = {why!r}")
    assert declared_degenerate_ok(task) == why
    d = judge_degeneracy(task, device="cpu", atol=None, rtol=None, cache_dir=str(tmp_path / "c"))
    assert not d.degenerate and d.override == f"the task file declares DEGENERATE_OK: {why}"
    assert _runs(calls) == 0
    bad, _ = _task(tmp_path, "bad", "x", extra="DEGENERATE_OK = 3")
    with pytest.raises(ValueError, match="bad: DEGENERATE_OK must be a non-empty string"):
        declared_degenerate_ok(bad)
    plain, _ = _task(tmp_path, "plain", "x")
    assert declared_degenerate_ok(plain) == ""


def test_the_json_cache_is_shared_and_checks_its_input(tmp_path):
    a, b = JsonDiskCache(tmp_path), JsonDiskCache(tmp_path)
    assert a.get("0123abcd") is None
    a.put("0123abcd", {"x": [1, 2]})
    assert b.get("0123abcd") == {"x": [1, 2]}  # another instance (process) reads it from disk
    with pytest.raises(ValueError, match="cache key"):
        a.get("../etc/passwd")
    with pytest.raises(ValueError, match="must be a dict"):
        a.put("0123abcd", [1])
    (tmp_path / "89abcdef.json").write_text("{not json")
    assert a.get("89abcdef") is None
    (tmp_path / "a_file").write_text("")
    unwritable = JsonDiskCache(tmp_path / "a_file")  # its directory cannot be made: only costs time
    unwritable.put("0123abcd", {"y": 1})
    assert unwritable.get("0123abcd") == {"y": 1} and JsonDiskCache(tmp_path / "a_file").get("0123abcd") is None


def test_the_baseline_cache_keeps_its_behaviour(tmp_path):
    BaselineCache(str(tmp_path)).put("00ff00ff00ff00ff", Baseline(eager_ms=1.5, compile_ms=None, error="x"))
    got = BaselineCache(str(tmp_path)).get("00ff00ff00ff00ff")
    assert got == Baseline(eager_ms=1.5, compile_ms=None, compile_s=None, error="x")
    assert json.loads((tmp_path / "00ff00ff00ff00ff.json").read_text())["torch"]
    assert BaselineCache(str(tmp_path / "none")).get("00ff00ff00ff00ff") is None


LOSS = '''import torch
import torch.nn as nn
import torch.nn.functional as F

CALLS = {calls!r}
TOLERANCES = {{"atol": 5e-3, "rtol": 5e-3}}


class Model(nn.Module):
    def forward(self, predictions, targets):
        with open(CALLS, "a") as f:
            f.write(".")
        return F.cross_entropy(predictions, targets)


def get_inputs():
    return [torch.rand(1024, 512), torch.randint(0, 512, (1024,))]


def get_init_inputs():
    return []
'''


def test_differential_inputs_are_part_of_the_cached_verdict(tmp_path):
    calls = tmp_path / "loss.calls"
    path = tmp_path / "loss.py"
    path.write_text(LOSS.format(calls=str(calls)))
    task, cache = load_task(path), tmp_path / "cache"
    first = judge_degeneracy(task, device="cpu", atol=None, rtol=None, cache_dir=str(cache))
    assert not first.degenerate and first.differential_inputs == (1,) and "input 1" in first.differential_reason
    n = _runs(calls)
    again = judge_degeneracy(task, device="cpu", atol=None, rtol=None, cache_dir=str(cache))
    assert again.cached and _runs(calls) == n
    assert (again.differential_inputs, again.differential_reason) == (first.differential_inputs,
                                                                       first.differential_reason)
    key = degeneracy_key(task, device="cpu", overrides=None, atol=None, rtol=None)
    entry = cache / f"{key}.json"
    record = json.loads(entry.read_text())
    assert record["differential_inputs"] == [1]
    # an entry written without the field (no differential inputs) still reads
    del record["differential_inputs"], record["differential_reason"]
    entry.write_text(json.dumps(record))
    plain = judge_degeneracy(task, device="cpu", atol=None, rtol=None, cache_dir=str(cache))
    assert plain.cached and plain.differential_inputs == () and _runs(calls) == n
    # one that is not a list of input indices is not used: the check runs again
    record["differential_inputs"] = ["1"]
    entry.write_text(json.dumps(record))
    redone = judge_degeneracy(task, device="cpu", atol=None, rtol=None, cache_dir=str(cache))
    assert not redone.cached and redone.differential_inputs == (1,) and _runs(calls) > n
