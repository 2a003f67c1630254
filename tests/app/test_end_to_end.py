"""The real command end to end, in subprocesses (each starts its own Ray): a smoke run
through the real evaluator and the real LLM client against a scripted server on
loopback; then a driver killed with SIGKILL, resumed, and stopped with Ctrl-C."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from foundry.store import read_evaluations
from support.openai_server import ScriptedOpenAIServer

from relu_llm import responder

ROOT = Path(__file__).resolve().parents[2]
RELU = ROOT / "benchmarks" / "smoke" / "relu.py"
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def llm_server():
    with ScriptedOpenAIServer(default=responder) as server:
        yield server


def _args(server, run_dir, *extra):
    return [sys.executable, "-m", "foundry", "+exp=smoke", f"tasks.path={RELU}", "llm=openai",
            f"llm.base_url={server.base_url}", "llm.model=gpt-4.1-mini", "island.count=2",
            f"hydra.run.dir={run_dir}", *extra]


def _env():
    return {**os.environ, "OPENAI_API_KEY": "test-key-not-secret", "HYDRA_FULL_ERROR": "1"}


def _default_sigint() -> None:
    # as in a terminal's foreground job: a test run started in the background of a shell
    # without job control has SIGINT ignored, and Python keeps an inherited "ignore"
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(args):
    return subprocess.Popen(args, cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True, preexec_fn=_default_sigint)


def _wait_for(run_dir, n, proc, timeout=150):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise AssertionError("the run ended early:\n" + proc.stdout.read()[-3000:])
        if (run_dir / "evaluations").is_dir() and len(read_evaluations(run_dir)) >= n:
            return read_evaluations(run_dir)
        time.sleep(0.3)
    raise AssertionError(f"fewer than {n} evaluations after {timeout} s")


def test_smoke_run_writes_the_run_directory(llm_server, tmp_path):
    run_dir = tmp_path / "run"
    out = subprocess.run(_args(llm_server, run_dir, "budget.evaluations=6"), cwd=ROOT, env=_env(),
                         capture_output=True, text=True, timeout=280)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "no GPU found, running the CPU path" in out.stdout
    assert "evaluation budget spent" in out.stdout
    records = read_evaluations(run_dir)
    assert len(records) == 6 and {r.candidate.island_id for r in records} <= {0, 1}
    assert all(r.candidate.origin == "llm" and r.result.hardware for r in records)
    assert list((run_dir / "evaluations").glob("part-*.parquet"))
    assert list((run_dir / "checkpoints" / "island-0").glob("*.ckpt"))
    calls = [json.loads(line) for line in (run_dir / "llm_calls.jsonl").read_text().splitlines()]
    assert len(calls) >= 6 and sum(c["cost_usd"] for c in calls) > 0
    assert "test-key-not-secret" not in (run_dir / "llm_calls.jsonl").read_text()
    # every kernel prompt describes the evaluator's device
    prompts = [r.prompt_text for r in llm_server.chat_requests() if "## Reference module" in r.prompt_text]
    assert prompts and all("## Hardware" in p and "- device: CPU " in p and "thread(s) per candidate" in p
                           for p in prompts)
    report = (run_dir / "report.md").read_text()
    assert "| relu |" in report and (run_dir / "plots" / "best_speedup.png").exists()
    correct = [r for r in records if r.result.correct]
    assert correct, [r.result.error for r in records]
    assert any(not r.result.correct for r in records) or len(records) < 4
    best = run_dir / "best" / "relu.py"
    spec = importlib.util.spec_from_file_location("best_relu", best)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    x = torch.randn(4, 1000)
    assert torch.equal(mod.ModelNew()(x), torch.relu(x))


def test_sigkill_then_resume_loses_nothing_and_ctrl_c_writes_the_report(llm_server, tmp_path):
    run_dir = tmp_path / "run"
    proc = _start(_args(llm_server, run_dir, "budget.evaluations=200", "budget.wall_time_s=600"))
    try:
        before = _wait_for(run_dir, 4, proc)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and the Ray it started
        proc.wait(30)
    before = read_evaluations(run_dir)  # everything it had recorded when it died
    assert len(before) >= 4
    # a budget the resumed run cannot spend before the Ctrl-C (at ~4 evaluations a second the
    # stored 200 can be): a lost Ctrl-C shows as the communicate() timeout below
    proc = _start([sys.executable, "-m", "foundry", f"resume={run_dir}", "budget.wall_time_s=600",
                   "budget.evaluations=100000", "run.progress=log"])
    try:
        _wait_for(run_dir, len(before) + 2, proc)
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C on the terminal reaches the whole group
        text, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, text[-3000:]
    assert "resuming" in text and f"{len(before)} evaluations already recorded" in text
    after = read_evaluations(run_dir)
    assert {r.eval_id for r in before} <= {r.eval_id for r in after}
    assert len(after) >= len(before) + 2
    assert len({r.session for r in after}) == 2
    meta = json.loads((run_dir / "run.json").read_text())
    assert "interrupted" in meta["stop_reason"]
    report = (run_dir / "report.md").read_text()
    assert f"evaluations: {len(after)};" in report and "interrupted" in report
    # the resumed islands held what the killed run had evaluated: no candidate twice per island
    seen = set()
    for r in after:
        key = (r.candidate.island_id, r.candidate.candidate_id)
        assert key not in seen, f"{key} evaluated twice"
        seen.add(key)


def test_multirun_of_the_default_path_runs_each_job_with_its_own_ray(tmp_path):
    """`-m island.count=1,2` with llm=none (the template engine, the real evaluator, tuning):
    two jobs, one after the other, each starting and stopping its own Ray."""
    out = subprocess.run(
        [sys.executable, "-m", "foundry", "-m", "+exp=smoke", f"tasks.path={RELU}", "island.count=1,2",
         "budget.evaluations=3", "templates.tune_budget=2", f"hydra.sweep.dir={tmp_path}"],
        cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=280)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    for job, count in (("0", 1), ("1", 2)):
        run_dir = tmp_path / job
        records = read_evaluations(run_dir)
        assert len(records) == 3 and (run_dir / "report.md").exists()
        assert all(r.candidate.origin == "template" for r in records)
        assert any(r.result.correct for r in records), [r.result.error[:200] for r in records]
        assert {r.candidate.island_id for r in records} <= set(range(count))
        assert len(list((run_dir / "checkpoints").glob("island-*"))) == count
    assert out.stdout.count("evaluation budget spent") == 2


def test_each_tasks_compiler_seed_is_judged_in_the_run(tmp_path):
    run_dir = tmp_path / "run"
    out = subprocess.run([sys.executable, "-m", "foundry", "+exp=smoke", f"tasks.path={RELU}", "llm=none",
                          "island.count=1", "run.compiler_seeds=true", "budget.evaluations=20",
                          f"hydra.run.dir={run_dir}"], cwd=ROOT, env=_env(), capture_output=True, text=True,
                         timeout=280)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    seeds = [r for r in read_evaluations(run_dir) if r.candidate.strategy_id == "compiler:inductor"]
    assert len(seeds) == 1 and seeds[0].candidate.origin == "seed", [r.candidate.strategy_id for r in
                                                                     read_evaluations(run_dir)]
    assert seeds[0].result.correct, seeds[0].result.error
    session = json.loads((run_dir / "run.json").read_text())["sessions"][-1]
    assert "Compiler seed (c backend)" in session["compiler_seeds"]["relu"]
    dispatch = session["dispatch"]  # the dispatcher's counts at the stop, its lanes' idle time with them
    assert dispatch["submitted"] >= len(read_evaluations(run_dir)) > 0
    assert [w["starved_s"] >= 0.0 for w in dispatch["workers"].values()] == [True]
    assert "compiler seed for relu" in out.stdout
    assert "| relu |" in (run_dir / "report.md").read_text()


BF16_TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    \"\"\"A bfloat16 scale-and-ReLU: no `c` template takes bfloat16, so on a CPU only its seed can win.\"\"\"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) * 2.0


def get_inputs():
    return [torch.randn(64, 256, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
"""


def test_a_task_the_templates_cannot_serve_waits_for_its_compiler_seed(tmp_path):
    """The `c` templates have nothing for a bfloat16 forward, so the island retires the
    task at once (every proposal a repeat); the run must still judge the seed that comes
    later, reopening the task, rather than end with every task finished."""
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "relu_bf16.py").write_text(BF16_TASK)
    run_dir = tmp_path / "run"
    out = subprocess.run([sys.executable, "-m", "foundry", "+exp=smoke", f"tasks.path={tasks}", "llm=none",
                          "island.count=1", "run.compiler_seeds=true", "budget.evaluations=20",
                          f"hydra.run.dir={run_dir}"], cwd=ROOT,
                         env={**_env(), "FOUNDRY_CACHE_DIR": str(tmp_path / "cache")},  # the seed made now, slowly
                         capture_output=True, text=True, timeout=280)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    records = read_evaluations(run_dir)
    seeds = [r for r in records if r.candidate.strategy_id == "compiler:inductor"]
    assert len(seeds) == 1, [(r.candidate.strategy_id, r.result.error[:100]) for r in records]
    assert seeds[0].result.correct, seeds[0].result.error
    assert any("reads or writes bfloat16" in r.result.error for r in records if r is not seeds[0])
    assert "every task finished" in out.stdout
