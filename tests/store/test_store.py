"""Run directory: Parquet log (atomic parts, journal, resume read-back), best files, report."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import pyarrow.parquet as pq

from foundry.store import EVAL_SCHEMA, EvaluationLog, RunDir, read_evaluations
from foundry.store.best import runnable_source
from foundry.store.report import build_report
from foundry.types import Candidate, EvalResult

SRC = textwrap.dedent('''\
    import torch
    import torch.nn as nn

    TUNABLE = {"BLOCK": [64, 128]}
    PARAMS = {"BLOCK": 64}


    class ModelNew(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = PARAMS["BLOCK"]

        def forward(self, x):
            return torch.relu(x)
    ''')


def pair(i: int, task: str = "t1", speed: float | None = 1.0, correct: bool = True):
    c = Candidate.make(task_id=task, source=SRC + f"# {i}\n", backend="c", params={"BLOCK": 128},
                       island_id=i % 2, generation=i, origin="template")
    r = EvalResult(candidate_id=c.candidate_id, task_id=task, stage=5 if correct else 2,
                   correct=correct, speedup_eager=speed if correct else None,
                   speedup_compile=(speed / 2) if (correct and speed) else None,
                   eager_ms=1.0, compile_ms=0.5, descriptor=(i % 4, 1, 0),
                   metrics={"k": [1, 2]}, flags=("x",) if not correct else ())
    return c, r


def test_parts_have_the_fixed_schema_and_round_trip(tmp_path):
    log = EvaluationLog(tmp_path, flush_rows=3, flush_s=1e9)
    pairs = [pair(i, speed=1.0 + i) for i in range(7)]
    for c, r in pairs:
        log.append(c, r, evaluator="ev0")
    parts = sorted((tmp_path / "evaluations").glob("part-*.parquet"))
    assert len(parts) == 2  # 3 + 3 flushed, 1 in the journal
    for p in parts:
        assert pq.read_schema(p).equals(EVAL_SCHEMA)
    back = read_evaluations(tmp_path)  # parts + live journal
    assert [b.seq for b in back] == list(range(7))
    assert [(b.candidate, b.result) for b in back] == pairs
    log.close()
    assert not list((tmp_path / "evaluations").glob("journal-*"))
    assert len(read_evaluations(tmp_path)) == 7
    assert not list((tmp_path / "evaluations").glob(".*tmp"))


def test_a_killed_writer_loses_nothing_it_recorded(tmp_path):
    """A child process appends and is SIGKILLed before closing; every appended row survives."""
    code = textwrap.dedent(f'''
        import os, signal, sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        from test_store import pair
        from foundry.store import EvaluationLog
        log = EvaluationLog({str(tmp_path)!r}, flush_rows=4, flush_s=1e9)
        for i in range(10):
            log.append(*pair(i))
        os.kill(os.getpid(), signal.SIGKILL)
    ''')
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == -9, proc.stderr
    assert len(read_evaluations(tmp_path)) == 10
    log = EvaluationLog(tmp_path)  # a new session folds the old journal into a part
    assert log.next_seq == 10
    assert not [j for j in (tmp_path / "evaluations").glob("journal-*") if j.stat().st_size]
    c, r = pair(99)
    log.append(c, r)
    log.close()
    back = read_evaluations(tmp_path)
    assert len(back) == 11 and back[-1].seq == 10 and len({b.eval_id for b in back}) == 11


def test_a_torn_journal_line_is_ignored(tmp_path):
    log = EvaluationLog(tmp_path, flush_rows=100, flush_s=1e9)
    log.append(*pair(0))
    with open(log._journal_path, "a") as f:
        f.write('{"eval_id": "cut sho')
    assert len(read_evaluations(tmp_path)) == 1


def test_best_file_is_runnable_with_tuned_params(tmp_path):
    c, _ = pair(0)
    src = runnable_source(c)
    assert 'PARAMS = {"BLOCK": 64}' not in src and "PARAMS = {'BLOCK': 128}" in src
    path = tmp_path / "m.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("m", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.ModelNew().block == 128


def test_report_tables_best_files_and_plots(tmp_path):
    run = RunDir(tmp_path)
    run.write_meta({"tasks": ["t1", "level1/2_b", "t_empty"]})
    log = EvaluationLog(tmp_path, flush_rows=2)
    for i, s in enumerate([1.2, 3.5, 2.0]):
        log.append(*pair(i, speed=s))
    log.append(*pair(5, correct=False))
    log.append(*pair(6, task="level1/2_b", correct=False))
    log.close()
    run.append_llm_calls([{"task_id": "t1", "cost_usd": 0.25}, {"task_id": "t1", "cost_usd": 0.5}])
    report = build_report(tmp_path).read_text()
    assert "| t1 | 3.50x | 1.75x | template | 3/4 (75%) | 4 | $0.7500 |" in report
    assert "| level1/2_b | — | — | — | 0/1 (0%) | 1 |" in report
    assert "| t_empty | — | — | — | 0/0 (0%) | 0 |" in report
    # level1/2_b has no correct kernel: counted at eager's time (1x; 0.5x of torch.compile's 0.5 ms)
    assert "1.87x vs eager (2 tasks), 0.94x vs torch.compile (2 tasks)" in report
    assert "no correct kernel found" in report
    best = (tmp_path / "best" / "t1.py").read_text()
    assert "# 1\n" in best and "3.500x" in best
    assert not (tmp_path / "best" / "level1" / "2_b.py").exists()
    assert (tmp_path / "plots" / "best_speedup.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "plots" / "archive" / "t1.png").stat().st_size > 1000


def test_report_shows_the_best_kernel_against_its_roofline_floor(tmp_path):
    import dataclasses
    run = RunDir(tmp_path)
    run.write_meta({"tasks": ["t1", "t2"]})
    log = EvaluationLog(tmp_path, flush_rows=2)
    position = {"floor_ms": 0.25, "fraction": 0.4, "bound": "memory", "eager_fraction": 0.2,
                "diagnosis": "memory-bound: 40% of the floor (moves 1.07 GB at 1700 GB/s of 4250; floor 0.25 ms, this 0.625 ms)"}
    hardware = {"source": "ncu", "diagnosis": "memory-bound at 40% of the floor; DRAM 39% of peak, SM 9%"}
    baselines = {"eager": {"kernels": 2, "launches": 2, "kernel_times_us": [["elementwise_kernel", 1100.0, 1],
                                                                             ["copy_kernel", 150.0, 1]]}}
    for i, s in enumerate([1.2, 1.6]):
        c, r = pair(i, speed=s)
        log.append(c, dataclasses.replace(r, runtime_ms=0.625, metrics={**r.metrics, "roofline": position,
                                                                         "hardware": hardware,
                                                                         "baseline_kernels": baselines}))
    log.append(*pair(3, task="t2", speed=1.1))  # no roofline position (a CPU run)
    log.close()
    report = build_report(tmp_path).read_text()
    assert "| best against the roofline floor | 40% of the floor (0.25 ms) |" in report
    assert "| bottleneck of the best kernel | memory-bound: 40% of the floor (moves 1.07 GB" in report
    assert report.count("best against the roofline floor") == 1  # t2 has none
    assert "| hardware of the best kernel (Nsight Compute) | memory-bound at 40% of the floor; DRAM 39% of peak" in report
    assert report.count("hardware of the best kernel") == 1
    assert ("| eager against the floor | 20% of the floor; 2 launches of 2 kernels, the slowest elementwise_kernel "
            "(1100 us) |") in report
    assert "![runtime against the roofline floor](plots/roofline.png)" in report
    assert (tmp_path / "plots" / "roofline.png").read_bytes()[:4] == b"\x89PNG"


def test_a_task_whose_baseline_failed_keeps_its_fastest_correct_kernel(tmp_path):
    import dataclasses
    from foundry.store.summary import summarize
    run = RunDir(tmp_path)
    run.write_meta({"tasks": ["t1", "t2"]})
    log = EvaluationLog(tmp_path, flush_rows=2)
    for i, ms in enumerate([3.0, 2.0, 2.5]):  # t1: no eager time beside any of them
        c, r = pair(i, speed=None)
        log.append(c, dataclasses.replace(r, runtime_ms=ms, eager_ms=None, compile_ms=None))
    for i, (speed, ms) in enumerate([(None, 1.0), (1.5, 2.8)], start=3):  # t2: one has a speedup
        c, r = pair(i, task="t2", speed=speed)
        log.append(c, dataclasses.replace(r, runtime_ms=ms))
    log.close()
    summaries = summarize(read_evaluations(tmp_path))
    assert summaries["t1"].best_runtime_ms == 2.0 and summaries["t1"].best_speedup_eager is None
    assert summaries["t2"].best_runtime_ms == 2.8 and summaries["t2"].best_speedup_eager == 1.5
    report = build_report(tmp_path).read_text()
    assert "no correct kernel found" not in report
    assert "# 1\n" in (tmp_path / "best" / "t1.py").read_text()


def test_a_kernel_judged_while_the_baselines_failed_is_weighed_against_the_tasks_baselines(tmp_path):
    """The faster kernel wins even where its verdict carries no speedup (the task's
    baselines failed when it was judged): its time is set against the baselines another
    record of the task carried from the same hardware."""
    import dataclasses
    from foundry.store.summary import summarize
    run = RunDir(tmp_path)
    run.write_meta({"tasks": ["t1"]})
    log = EvaluationLog(tmp_path, flush_rows=2)
    c, r = pair(0)
    log.append(c, dataclasses.replace(r, runtime_ms=3.34, eager_ms=10.0, compile_ms=3.06, speedup_eager=10.0 / 3.34,
                                      speedup_compile=3.06 / 3.34, hardware="NVIDIA H200"))
    c, r = pair(1, speed=None)
    log.append(c, dataclasses.replace(r, runtime_ms=3.04, eager_ms=None, compile_ms=None, hardware="NVIDIA H200"))
    c, r = pair(2, speed=None)  # faster, but judged on other hardware: no baseline to set it against
    log.append(c, dataclasses.replace(r, runtime_ms=1.0, eager_ms=None, compile_ms=None, hardware="NVIDIA H100"))
    log.close()
    best = summarize(read_evaluations(tmp_path))["t1"]
    assert best.best_runtime_ms == 3.04
    assert abs(best.best_speedup_compile - 3.06 / 3.04) < 1e-9 and abs(best.best_speedup_eager - 10.0 / 3.04) < 1e-9


def test_report_cli(tmp_path):
    log = EvaluationLog(tmp_path)
    log.append(*pair(0, speed=2.0))
    log.close()
    out = subprocess.run([sys.executable, "-m", "foundry.report", str(tmp_path)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "2.00x" in (tmp_path / "report.md").read_text()
    bad = subprocess.run([sys.executable, "-m", "foundry.report", str(tmp_path / "nope")],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "not a run directory" in bad.stderr


def test_a_task_without_a_correct_kernel_says_why_its_evaluations_failed(tmp_path):
    import dataclasses

    from foundry.store.summary import summarize
    run = RunDir(tmp_path)
    run.write_meta({"tasks": ["t1", "level1/2_b"]})
    log = EvaluationLog(tmp_path)
    errors = ["evaluator error: OutOfMemoryError: CUDA out of memory\nTried to allocate 16 GiB",
              "[wrong_values] output: max abs error 3 | more",
              "evaluator error: OutOfMemoryError: CUDA out of memory\nagain", ""]
    for i, error in enumerate(errors):
        c, r = pair(i, task="level1/2_b", correct=False)
        log.append(c, dataclasses.replace(r, error=error))
    log.append(*pair(9, speed=2.0))
    log.close()
    summaries = summarize(read_evaluations(tmp_path), task_ids=["t1", "level1/2_b"])
    assert summaries["level1/2_b"].failures == ("evaluator error: OutOfMemoryError: CUDA out of memory",
                                                "[wrong_values] output: max abs error 3 | more",
                                                "stopped at stage 2")
    assert summaries["t1"].failures == ()
    report = build_report(tmp_path).read_text()
    assert ("| why its evaluations failed (most frequent first) | `evaluator error: OutOfMemoryError: CUDA out of "
            "memory`; `[wrong_values] output: max abs error 3 \\| more`; `stopped at stage 2` |") in report
    assert report.count("why its evaluations failed") == 1


def test_a_device_out_of_memory_failure_line_says_who_held_the_device():
    """torch's message lists each process's share past where a failure line is cut (the
    report and the sample script showed "... Process 8812 has 4"): the line keeps what was
    asked, what was free and every holder."""
    from foundry.store.summary import FAILURE_LINE_CHARS, out_of_memory_line
    message = ("evaluator error: OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB. GPU 0 has a "
               "total capacity of 79.18 GiB of which 5.09 GiB is free. Including non-PyTorch memory, this process "
               "has 31.22 GiB memory in use. Process 8812 has 42.87 GiB memory in use. Of the allocated memory "
               "30.50 GiB is allocated by PyTorch, and 212.00 MiB is reserved by PyTorch but unallocated.")
    line = out_of_memory_line(message)
    assert line == ("evaluator error: OutOfMemoryError: CUDA out of memory: 8.00 GiB asked, 5.09 GiB of 79.18 GiB "
                    "free; held: this process 31.22 GiB, process 8812 42.87 GiB")
    assert len(line) <= FAILURE_LINE_CHARS < len(message)
    assert out_of_memory_line("[wrong_values] output: max abs error 3") == ""
    assert out_of_memory_line("evaluator error: OutOfMemoryError: CUDA out of memory") == ""  # nothing to condense


def test_a_task_whose_baselines_failed_says_why(tmp_path):
    import dataclasses

    from foundry.store.summary import last_line, summarize
    run = RunDir(tmp_path)
    run.write_meta({"tasks": ["t1", "level1/45_pool"]})
    log = EvaluationLog(tmp_path)
    c, r = pair(1, task="level1/45_pool")
    traceback = ("Traceback (most recent call last):\n  File \"x.py\", line 3\n"
                 "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 16.00 GiB | again\n\n")
    log.append(c, dataclasses.replace(r, eager_ms=None, compile_ms=None, speedup_eager=None, speedup_compile=None,
                                      metrics={"baseline_error": traceback}))
    c, r = pair(2)  # its baselines were timed: an error it carried is not "why one is missing"
    log.append(c, dataclasses.replace(r, metrics={"baseline_error": "RuntimeError: max-autotune failed"}))
    log.close()
    summaries = summarize(read_evaluations(tmp_path), task_ids=["t1", "level1/45_pool"])
    why = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 16.00 GiB | again"
    assert summaries["level1/45_pool"].baseline_error == why == last_line(traceback)
    assert summaries["t1"].baseline_error == ""
    report = build_report(tmp_path).read_text()
    assert ("| why a baseline is missing | `torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 16.00 GiB "
            "\\| again` |") in report
    assert report.count("why a baseline is missing") == 1
    assert last_line("\n \n") == "" and last_line("a\nb" * 1, limit=1) == "b"
