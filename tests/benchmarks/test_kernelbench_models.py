"""benchmarks/kernelbench_models.py without a search: a model whose step fails is reported
and the next goes on; the per-model summary line from a deploy record and a run."""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "kernelbench_models.py"


def _script():
    spec = importlib.util.spec_from_file_location("kernelbench_models", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_model_that_fails_to_extract_is_reported_and_the_next_one_goes_on(tmp_path):
    bad = tmp_path / "1_Broken.py"
    bad.write_text("raise RuntimeError('not a model')\n")
    also_bad = tmp_path / "2_NoModel.py"
    also_bad.write_text("x = 1\n")
    p = subprocess.run([sys.executable, str(SCRIPT), str(bad), str(also_bad), "--out", str(tmp_path / "out")],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "1_Broken:" in p.stdout and "2_NoModel:" in p.stdout  # the second was tried after the first failed
    assert "2 of 2 model(s) failed: 1_Broken, 2_NoModel" in p.stdout
    assert (tmp_path / "out" / "1_Broken" / "extract.log").is_file()
    assert not (tmp_path / "out" / "1_Broken" / "steps.json").exists()  # no step finished


def test_the_summary_names_the_regions_the_kernels_and_max_autotune(tmp_path):
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"regions": [{"label": "conv2d_relu", "count": 2, "share": 0.8},
                                                {"label": "linear", "count": 1, "share": 0.1}]}))
    record = {"returned": "deployed (graph)", "swapped": [["01_conv2d_relu", ["conv1"]]], "eager_ms": 3.0,
              "compile_ms": 2.0, "max_autotune_ms": 1.9, "returned_ms": 1.6, "max_abs_err": 1e-7, "threads": 2}
    line = _script().summary("4_LeNet5", record, manifest, covered=1)
    assert "conv2d_relu x2 (80%)" in line and "1 of 2 region(s) with a correct kernel" in line
    assert "max-autotune 1.9 ms" in line and "(1.250x the faster of eager and torch.compile)" in line
    assert "max-autotune" not in _script().summary("m", {**record, "max_autotune_ms": None}, manifest)
    beside = _script().summary("m", {**record, "returned_ms_beside_max_autotune": 1.52}, manifest)
    assert "max-autotune 1.9 ms (1.250x: returned 1.52 ms beside it)" in beside


def test_a_search_cut_short_starts_again_from_an_empty_run_folder(tmp_path, monkeypatch, capsys):
    """A call's time ran out during a search: its run folder holds a run without a report.
    The next call removes it and searches again (the main job refuses a folder holding a
    run), with the model's whole search time."""
    script = _script()
    d = tmp_path / "4_LeNet5"
    (d / "tasks").mkdir(parents=True)
    (d / "tasks" / "manifest.json").write_text("{}")
    (d / "run").mkdir()
    (d / "run" / "evaluations.jsonl").write_text("partial\n")
    ran = []

    def step(cmd, log, timeout_s, gpu=None):
        ran.append(cmd)
        if "foundry" in cmd and "-m" in cmd:
            assert not (d / "run" / "evaluations.jsonl").exists()  # the cut run is gone before the search
            (d / "run").mkdir(exist_ok=True)
            (d / "run" / "report.md").write_text("done")
        else:
            (d / "deploy.json").write_text("{}")
        return 1.0

    monkeypatch.setattr(script, "_step", step)
    a = argparse.Namespace(llm="none", search_s=60, max_autotune=False, elimination_s=None)
    script.model_steps("4_LeNet5.py", d, a, [], [])
    assert len(ran) == 2 and "budget.wall_time_s=60" in ran[0]
    assert "unfinished search was there: removed" in capsys.readouterr().out
    assert json.loads((d / "steps.json").read_text()) == {"search": 1.0, "deploy": 1.0}


def test_what_was_measured_is_written_before_max_autotune_compiles(tmp_path, monkeypatch):
    """deploy.json holds the returned model's check before max-autotune's compile starts
    (a call cut there keeps it, saying so), and max-autotune's round after."""
    import torch

    import foundry.deploy as deploy_pkg
    import foundry.deploy.api as api
    import foundry.deploy.check as check_mod
    import foundry.deploy.runinfo as runinfo
    import foundry.extract.spec as spec_mod
    from foundry.deploy.check import CheckResult

    model = torch.nn.Linear(2, 2)
    monkeypatch.setattr(spec_mod, "load_spec", lambda *a, **k: (model, None))
    monkeypatch.setattr(deploy_pkg, "deploy", lambda m, run_dir, **k: m)
    model.foundry_deploy = api.DeployInfo(run_dir="r", tasks_dir="t", swapped=(), passed_over=(), dispatches=(),
                                          returned="torch.compile(original)", untried=("a", "b", "a"))
    monkeypatch.setattr(runinfo, "read_run", lambda *a, **k: argparse.Namespace(manifest=None))
    monkeypatch.setattr(api, "example_inputs_of", lambda manifest: (torch.ones(1, 2),))
    out = tmp_path / "deploy.json"
    calls = []

    def check(original, deployed, inputs, *, with_compile=True, max_autotune=False):
        calls.append(max_autotune)
        if max_autotune:
            assert json.loads(out.read_text())["max_autotune"].startswith("compiling")
            if len(calls) == 2 and cut:
                raise KeyboardInterrupt  # the call's limit, mid-compile
        return CheckResult(max_abs_err=0.0, eager_ms=3.0, compile_ms=None if max_autotune else 2.0,
                           deployed_ms=1.9 if max_autotune else 1.5, kernel_calls=0, fallback_calls=0, threads=1,
                           max_autotune_ms=2.5 if max_autotune else None)

    monkeypatch.setattr(check_mod, "check", check)
    for cut in (True, False):
        calls.clear()
        try:
            _script().deploy_one("m.py", "run", [], None, str(out), max_autotune=True)
        except KeyboardInterrupt:
            pass
        record = json.loads(out.read_text())
        assert calls == [False, True] and record["returned_ms"] == 1.5 and record["compile_ms"] == 2.0
        assert record["untried"] == {"a": 2, "b": 1}
        if cut:
            assert record["max_autotune_ms"] is None and record["max_autotune"].startswith("compiling")
        else:
            assert record["max_autotune_ms"] == 2.5 and record["returned_ms_beside_max_autotune"] == 1.9
            assert record["max_autotune"].startswith("timed beside the returned model")


def test_with_extract_jobs_every_model_is_extracted_first_and_a_failure_is_not_retried(tmp_path):
    bad = tmp_path / "1_Broken.py"
    bad.write_text("raise RuntimeError('not a model')\n")
    also_bad = tmp_path / "2_NoModel.py"
    also_bad.write_text("x = 1\n")
    p = subprocess.run([sys.executable, str(SCRIPT), str(bad), str(also_bad), "--out", str(tmp_path / "out"),
                        "--extract-jobs", "2"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 1, p.stdout + p.stderr
    assert p.stdout.count("1_Broken:") == 1 and p.stdout.count("2_NoModel:") == 1, p.stdout
    assert "2 of 2 model(s) failed: 1_Broken, 2_NoModel" in p.stdout
    assert all((tmp_path / "out" / m / "extract.log").is_file() for m in ("1_Broken", "2_NoModel"))


def _write_step_output(log) -> float:
    """What a step of a model (its log's name) leaves in the model's folder, as the real
    step does: the manifest, the run's report, the deploy record."""
    d = log.parent
    if log.stem == "extract":
        (d / "tasks").mkdir()
        (d / "tasks" / "manifest.json").write_text(json.dumps({"regions": []}))
    elif log.stem == "search":
        (d / "run").mkdir()
        (d / "run" / "report.md").write_text("done")
    else:
        (d / "deploy.json").write_text(json.dumps({"returned": "original", "swapped": [], "eager_ms": 2.0,
                                                   "compile_ms": 1.0, "returned_ms": 1.0, "max_abs_err": 0.0,
                                                   "threads": 1}))
    return 1.0


def test_with_extract_jobs_the_searches_start_after_every_extraction(tmp_path, monkeypatch):
    script = _script()
    order = []

    def step(cmd, log, timeout_s, gpu=None):
        order.append((log.parent.name, log.stem))
        return _write_step_output(log)

    monkeypatch.setattr(script, "_step", step)
    monkeypatch.setattr(script, "covered_tasks", lambda run_dir: 0)
    assert script.main(["a/1_A.py", "a/2_B.py", "--out", str(tmp_path), "--extract-jobs", "2"]) == 0
    assert sorted(order[:2]) == [("1_A", "extract"), ("2_B", "extract")]
    assert order[2:] == [("1_A", "search"), ("1_A", "deploy"), ("2_B", "search"), ("2_B", "deploy")]


def test_with_gpus_models_run_at_once_each_on_a_gpu_of_its_own(tmp_path, monkeypatch):
    """--gpus 2: two models' steps run at the same time, each pinned to one GPU for all its
    steps; the third model takes the GPU the first to finish gave back."""
    import threading
    script = _script()
    gpus_of: dict = {}
    both_started = threading.Barrier(2, timeout=30)  # the first two models' extractions meet: they ran at once
    lock = threading.Lock()

    def step(cmd, log, timeout_s, gpu=None):
        with lock:
            gpus_of.setdefault(log.parent.name, set()).add(gpu)
        if log.stem == "extract" and log.parent.name in ("1_A", "2_B"):
            both_started.wait()
        return _write_step_output(log)

    monkeypatch.setattr(script, "_step", step)
    monkeypatch.setattr(script, "covered_tasks", lambda run_dir: 0)
    assert script.main(["a/1_A.py", "a/2_B.py", "a/3_C.py", "--out", str(tmp_path), "--device", "cuda",
                        "--gpus", "2"]) == 0
    assert {m: len(g) for m, g in gpus_of.items()} == {"1_A": 1, "2_B": 1, "3_C": 1}  # one GPU for all its steps
    assert gpus_of["1_A"] | gpus_of["2_B"] == {0, 1} and gpus_of["3_C"] <= {0, 1}


def test_gpus_without_a_cuda_device_is_refused(capsys):
    import pytest
    with pytest.raises(SystemExit):
        _script().main(["a/1_A.py", "--gpus", "2"])
    assert "--gpus 2: give a count of GPUs, with --device cuda" in capsys.readouterr().err


def test_a_step_on_a_gpu_sees_that_gpu_alone(tmp_path):
    log = tmp_path / "step.log"
    _script()._step([sys.executable, "-c", "import os; print(os.environ['CUDA_VISIBLE_DEVICES'])"], log, 60, gpu=3)
    assert log.read_text().strip() == "3"
