"""The Evaluator end to end on the CPU: stages, worker reuse and isolation, parameters,
baselines and their cache, degenerate tasks, secrets."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from foundry.evaluate import EvalConfig, Evaluator
from foundry.tasks import load_task
from foundry.types import Candidate, Stage

ROOT = Path(__file__).resolve().parents[2]
HONEST = (ROOT / "tests" / "exploits" / "candidates" / "honest_relu_c.py").read_text()
SECRET = "sk-test-0123456789abcdef"


@pytest.fixture(scope="module")
def relu():
    return load_task(ROOT / "benchmarks" / "smoke" / "relu.py")


@pytest.fixture(scope="module")
def ev(tmp_path_factory):
    os.environ["FOUNDRY_TEST_API_KEY"] = SECRET
    os.environ["FOUNDRY_TEST_PLAIN"] = "plain-visible-42"
    e = Evaluator(config=EvalConfig.from_config({
        "trials": 3, "timeout_s": 15, "compile_baseline": False, "timing_min_ms": 50,
        "baseline_cache_dir": str(tmp_path_factory.mktemp("baselines"))}))
    yield e
    e.close()
    os.environ.pop("FOUNDRY_TEST_API_KEY", None)
    os.environ.pop("FOUNDRY_TEST_PLAIN", None)


def cand(task, source, backend="c", **kw):
    return Candidate.make(task_id=task.task_id, source=textwrap.dedent(source), backend=backend, **kw)


def test_empty_source_is_stage_zero_with_its_note(ev, relu):
    r = ev.evaluate(task=relu, candidate=Candidate(candidate_id="x", task_id=relu.task_id, source="",
                                                   backend="c", note="no code block in the reply"))
    assert r.stage == Stage.SYNTAX and not r.correct and r.error == "no code block in the reply"


def test_syntax_error_and_bad_backends(ev, relu):
    assert ev.evaluate(task=relu, candidate=cand(relu, "def (:")).stage == Stage.SYNTAX
    assert ev.evaluate(task=relu, candidate=cand(relu, HONEST, backend="sycl")).stage == Stage.SYNTAX
    r = ev.evaluate(task=relu, candidate=cand(relu, HONEST, backend="cuda"))
    assert r.stage == Stage.COMPILE and "cuda" in r.error


def test_build_error_is_compile_stage_with_the_compiler_message(ev, relu):
    src = HONEST.replace("y[i] = x[i]", "y[i] = undefined_name + x[i]")
    r = ev.evaluate(task=relu, candidate=cand(relu, src))
    assert r.stage == Stage.COMPILE and "undefined_name" in r.error


def test_forward_exception_is_runtime_stage(ev, relu):
    src = HONEST.replace("x = x.contiguous()", "raise ValueError('boom in forward')")
    r = ev.evaluate(task=relu, candidate=cand(relu, src))
    assert r.stage == Stage.RUNTIME and "boom in forward" in r.error


def test_warm_worker_is_reused_and_survives_crashes(ev, relu):
    ok1 = ev.evaluate(task=relu, candidate=cand(relu, HONEST))
    pid = ev._worker.proc.pid
    crash = HONEST.replace("self.lib.relu_kernel(x, y, x.numel())",
                           "self.lib.relu_kernel(x, y, 1 << 40)")
    bad = ev.evaluate(task=relu, candidate=cand(relu, crash))
    ok2 = ev.evaluate(task=relu, candidate=cand(relu, HONEST))
    assert ok1.correct and ok2.correct and bad.stage == Stage.RUNTIME
    assert ev._worker.proc.pid == pid  # the same warm worker forked all three


def test_a_candidate_patching_torch_cannot_affect_the_next(ev, relu):
    patcher = HONEST.replace("class ModelNew", "vars(torch)['empty_like'] = lambda x: x\nclass ModelNew")
    r = ev.evaluate(task=relu, candidate=cand(relu, patcher))
    assert not r.correct and "input_mutation" in r.flags  # its kernel wrote into its input
    assert ev.evaluate(task=relu, candidate=cand(relu, HONEST)).correct


def test_params_reach_the_module_global(ev, relu):
    src = HONEST.replace('TUNABLE = {"UNUSED": [1, 2]}', 'TUNABLE = {"MODE": ["fast", "slow"]}').replace(
        "x = x.contiguous()", "assert PARAMS['MODE'] == EXPECTED, PARAMS\n        x = x.contiguous()")
    default = ev.evaluate(task=relu, candidate=cand(relu, src.replace("EXPECTED", "'fast'")))
    chosen = ev.evaluate(task=relu, candidate=cand(relu, src.replace("EXPECTED", "'slow'"), params={"MODE": "slow"}))
    wrong = ev.evaluate(task=relu, candidate=cand(relu, src.replace("EXPECTED", "'slow'")))
    assert default.correct and chosen.correct and wrong.stage == Stage.RUNTIME


def test_baselines_are_cached_on_disk(ev, relu, monkeypatch):
    eager, compiled = ev.baselines(task=relu)
    assert eager > 0 and compiled is None
    files = list(Path(ev.config.baseline_cache_dir).glob("*.json"))
    assert len(files) == 1
    other = Evaluator(config=ev.config)
    import foundry.evaluate.evaluator as module

    def no_run(*a, **k):
        raise AssertionError("the cached baseline was timed again")

    monkeypatch.setattr(module, "run_job", no_run)
    try:
        assert other.baselines(task=relu) == (eager, None)
        assert other.baseline(task=relu, measure=False).eager_ms == eager
    finally:
        other.close()


def test_a_baseline_record_without_measuring_is_only_what_the_cache_holds(tmp_path, relu, monkeypatch):
    import foundry.evaluate.evaluator as module

    def no_run(*a, **k):
        raise AssertionError("a baseline was timed")

    monkeypatch.setattr(module, "run_job", no_run)
    with Evaluator(config=EvalConfig.from_config({"compile_baseline": False,
                                                  "baseline_cache_dir": str(tmp_path)})) as judge:
        assert judge.baseline(task=relu, measure=False) is None


def test_degenerate_task_is_flagged_not_scored(ev, tmp_path):
    path = tmp_path / "zeros.py"
    path.write_text((ROOT / "benchmarks" / "smoke" / "relu.py").read_text().replace(
        "return torch.relu(x)", "return x * 0.0"))
    task = load_task(path)
    src = HONEST.replace("y[i] = x[i] > 0.f ? x[i] : 0.f;", "y[i] = 0.f * x[i];")
    r = ev.evaluate(task=task, candidate=cand(task, src))
    assert not r.correct and "degenerate_task" in r.flags and r.speedup_eager is None


def test_secrets_never_reach_the_worker_or_the_result(ev, relu):
    src = """
    import os
    import torch.nn as nn
    raise RuntimeError("env: " + os.environ.get("FOUNDRY_TEST_API_KEY", "absent") + " "
                       + os.environ.get("FOUNDRY_TEST_PLAIN", "absent") + " ${SECRET}")
    class ModelNew(nn.Module):
        pass
    """.replace("${SECRET}", SECRET)  # even a secret the candidate knows is scrubbed
    r = ev.evaluate(task=relu, candidate=cand(relu, src))
    assert r.stage == Stage.COMPILE
    assert "plain-visible-42" in r.error and "absent" in r.error  # the channel works
    assert SECRET not in r.error and "[redacted]" in r.error
    assert SECRET not in repr(r.to_row())


def test_large_speedups_are_rechecked(ev, relu, monkeypatch):
    monkeypatch.setattr(ev, "_baseline", lambda task, *phases: __import__(
        "foundry.evaluate.baselines", fromlist=["Baseline"]).Baseline(eager_ms=1e6, compile_ms=None))
    r = ev.evaluate(task=relu, candidate=cand(relu, HONEST))
    assert r.correct and r.metrics.get("speedup_rechecked") and r.metrics.get("recheck_runtime_ms")
    assert r.runtime_ms >= r.metrics["recheck_runtime_ms"] or r.runtime_ms > 0


@pytest.mark.skipif(not __import__("foundry.evaluate.isolation", fromlist=["x"]).available(),
                    reason="needs root / CAP_SYS_ADMIN for namespaces")
def test_isolated_worker_cannot_write_files_read_the_judge_or_connect(ev, relu, tmp_path):
    import socket
    import foundry.evaluate
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    probe = Path(foundry.evaluate.__file__).parent / "tamper_probe.txt"
    src = f"""
    import os, socket
    import torch.nn as nn
    res = []
    try:
        open({str(probe)!r}, "w").write("x")
        res.append("write:ok")
    except OSError as e:
        res.append("write:denied")
    try:
        open("/proc/{os.getpid()}/environ", "rb").read()
        res.append("environ:ok")
    except OSError:
        res.append("environ:denied")
    try:
        socket.create_connection(("127.0.0.1", {server.getsockname()[1]}), timeout=2)
        res.append("net:ok")
    except OSError:
        res.append("net:denied")
    open("scratch.txt", "w").write("own temp dir is writable")
    res.append("tmp:ok")
    raise RuntimeError(" ".join(res))
    class ModelNew(nn.Module):
        pass
    """
    try:
        r = ev.evaluate(task=relu, candidate=cand(relu, src))
    finally:
        server.close()
        existed = probe.exists()
        probe.unlink(missing_ok=True)
    assert not existed
    for word in ("write:denied", "environ:denied", "net:denied", "tmp:ok"):
        assert word in r.error, r.error
