"""benchmarks/quality.py end to end on CPU: small tasks, torch.compile, a run directory's
best kernels (one correct, one wrong, one that hangs), JSON and table written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "quality.py"

CORRECT = """import torch
import torch.nn as nn

PARAMS = {"UNUSED": 1}


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.clamp_min(x, 0.0)
"""
WRONG = """import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x * 0.5
"""
HANGS = """import time
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        time.sleep(600)
        return x
"""


def test_quality_script_on_two_small_cpu_tasks(tmp_path):
    best = tmp_path / "run" / "best" / "level1"
    best.mkdir(parents=True)
    (best / "08_ReLU.py").write_text(CORRECT)
    (best / "22_Softmax.py").write_text(HANGS)
    out = tmp_path / "out"
    cmd = [sys.executable, str(SCRIPT), "--device", "cpu", "--profile", "small", "--level", "1",
           "--tasks", "8,22", "--run-dir", str(tmp_path / "run"), "--out", str(out),
           "--trials", "5", "--warmup", "1", "--flush-mb", "4", "--task-timeout", "10",
           "--compile-timeout", "200", "--threads", "1", "--bandwidth", "2e10", "--flop-rate", "1e11"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=280, cwd=tmp_path,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "[2/2]" in proc.stdout and "| summary | value | tasks |" in proc.stdout

    report = json.loads((out / "quality.json").read_text())
    assert (out / "quality.md").read_text().startswith("| task |")
    rows = {r["task_id"]: r for r in report["tasks"]}
    assert set(rows) == {"level1/08_ReLU", "level1/22_Softmax"}
    for r in rows.values():
        assert r["eager_ms"] > 0 and r["profile"] == "small"
        assert r["roofline"]["floor_ms"] == max(r["roofline"]["memory_ms"], r["roofline"]["compute_ms"]) > 0
        assert r["compile_ms"] is not None or r["compile"]["error"]
        assert r["floor_fraction"]["eager"] == r["roofline"]["floor_ms"] / r["eager_ms"]
    relu, softmax = rows["level1/08_ReLU"], rows["level1/22_Softmax"]
    assert relu["best"]["correct"] is True and relu["best_ms"] > 0
    assert relu["best_vs_eager"] == relu["eager_ms"] / relu["best_ms"]
    assert "timeout in phase best" in softmax["best"]["error"]  # recorded, not fatal
    assert softmax["best_ms"] is None

    summary = report["summary"]
    assert summary["tasks"] == 2 and summary["failures"]["best"] == 1
    assert set(summary["fast_p"]) == {"compile_vs_eager", "best_vs_eager", "best_vs_compile"}
    assert summary["fast_p"]["best_vs_eager"]["1.0"] == (0.5 if relu["best_vs_eager"] > 1 else 0.0)
    assert summary["geomean"]["best_vs_eager"]["tasks"] == 1
    assert abs(summary["geomean"]["best_vs_eager"]["value"] / relu["best_vs_eager"] - 1) < 1e-9
    assert report["ceilings"]["bandwidth_bytes_per_s"] == 2e10 and report["environment"]["torch"]


def _quality_module():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import quality
        import quality_worker
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return quality, quality_worker


def test_summary_fast_p_and_geomeans():
    quality, _ = _quality_module()

    def row(eager, compiled, best, floor=1.0):
        r = {"compile_vs_eager": eager / compiled if compiled else None,
             "best_vs_eager": eager / best if best else None,
             "best_vs_compile": compiled / best if best and compiled else None,
             "floor_fraction": {"eager": floor / eager, "compile": floor / compiled if compiled else None,
                                "best": floor / best if best else None},
             "eager": {"ms": eager}, "compile": {"ms": compiled} if compiled else {"error": "boom"},
             "best": {"ms": best} if best else None}
        return r

    rows = [row(2.0, 1.0, 0.5), row(4.0, 4.0, 2.0), row(3.0, None, None)]
    s = quality.summarize(rows, have_best=True)
    assert s["fast_p"]["compile_vs_eager"] == {"1.0": 1 / 3, "1.5": 1 / 3, "2.0": 0.0}
    assert s["fast_p"]["best_vs_eager"] == {"1.0": 2 / 3, "1.5": 2 / 3, "2.0": 1 / 3}
    assert abs(s["geomean"]["best_vs_eager"]["value"] - (4.0 * 2.0) ** 0.5) < 1e-12
    # floor fractions are capped at 1 (best at 0.5 ms beats a 1 ms floor)
    assert abs(s["geomean"]["best_floor_fraction"]["value"] - (1.0 * 0.5) ** 0.5) < 1e-12
    assert s["failures"] == {"eager": 0, "compile": 1, "best": 0}
    assert "best_vs_eager" not in quality.summarize(rows, have_best=False)["fast_p"]


def test_output_comparison_and_best_file_paths(tmp_path):
    import torch
    quality, worker = _quality_module()
    ok, err = worker._compare(torch.ones(3), torch.ones(3) * 1.001, 1e-2, 1e-2)
    assert ok and abs(err - 1e-3) < 1e-6
    ok, err = worker._compare(torch.ones(3), torch.ones(3) * 0.5, 1e-2, 1e-2)
    assert not ok and abs(err - 0.5) < 1e-9
    assert worker._compare(torch.ones(3), torch.ones(4), 1e-2, 1e-2) == (False, float("inf"))
    # no tolerance given: the judge's float32 default, which a 1e-3 error exceeds
    assert not worker._compare(torch.ones(3), torch.ones(3) * 1.001, None, None)[0]
    assert worker._compare(torch.ones(3), torch.ones(3) * 1.0001, None, None)[0]
    assert quality.best_file(tmp_path, "level1/08_ReLU") == tmp_path / "best" / "level1" / "08_ReLU.py"
    assert quality.best_file(tmp_path, "my task") == tmp_path / "best" / "my_task.py"
