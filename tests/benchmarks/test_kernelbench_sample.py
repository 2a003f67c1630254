"""The KernelBench sample benchmark's rule and figures (no run: a folder of empty problem
files and hand-made task rows)."""

from __future__ import annotations

import json
import math

import pytest

from support.benchmark_script import load_benchmark


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("kernelbench_sample")


def test_the_sample_is_every_nth_present_problem_by_number(bench, tmp_path):
    for level, numbers in ((1, [1, 2, 3, 5, 8, 13, 21, 34, 55]), (2, [10, 9])):
        folder = tmp_path / f"level{level}"
        folder.mkdir()
        for n in numbers:
            (folder / f"{n}_Problem.py").write_text("")
        (folder / "README.md").write_text("")
    assert bench.sample(tmp_path, levels=[1, 2], every=4) == ["1/1", "1/8", "1/55", "2/9"]
    with pytest.raises(SystemExit, match="level3"):
        bench.sample(tmp_path, levels=[3], every=4)


def problem_folder(tmp_path, numbers_by_level):
    for level, numbers in numbers_by_level.items():
        folder = tmp_path / f"level{level}"
        folder.mkdir()
        for n in numbers:
            (folder / f"{n}_Problem.py").write_text("")
    return tmp_path


def test_offsets_give_disjoint_samples_that_cover_every_problem(bench, tmp_path):
    path = problem_folder(tmp_path, {1: range(1, 11), 2: range(1, 7)})
    samples = [bench.sample(path, levels=[1, 2], every=4, offset=k) for k in range(4)]
    assert samples[1] == ["1/2", "1/6", "1/10", "2/2", "2/6"]
    assert sum(len(s) for s in samples) == 16 and len(set().union(*map(set, samples))) == 16
    with pytest.raises(SystemExit, match="--offset"):
        bench.sample(path, levels=[1], every=4, offset=4)


def test_a_seeded_sample_is_drawn_at_random_and_the_same_for_the_same_seed(bench, tmp_path):
    path = problem_folder(tmp_path, {1: range(1, 31), 2: range(1, 31)})
    first = bench.sample(path, levels=[1, 2], every=4, seed=7, count=10)
    assert first == bench.sample(path, levels=[1, 2], every=4, seed=7, count=10) and len(set(first)) == 10
    assert first != bench.sample(path, levels=[1, 2], every=4, seed=8, count=10)
    assert first == sorted(first, key=lambda p: tuple(int(x) for x in p.split("/")))
    with pytest.raises(SystemExit, match="--count 61"):
        bench.sample(path, levels=[1, 2], every=4, seed=7, count=61)


def test_only_keeps_the_named_problems_of_the_sample(bench):
    problems = ["1/1", "1/8", "1/55", "2/9"]
    assert bench.restrict(problems, []) == problems
    assert bench.restrict(problems, ["2/9", "1/8"]) == ["1/8", "2/9"]
    with pytest.raises(SystemExit, match="1/2 not in the sample"):
        bench.restrict(problems, ["1/1", "1/2"])


def test_a_task_without_a_kernel_counts_at_eagers_time(bench):
    rows = {
        "a": {"correct": 3, "best_ms": 1.0, "eager_ms": 2.0, "compile_ms": 1.5, "max_autotune_ms": 1.2,
              "roofline": {"fraction": 0.9, "bound": "memory"}},
        "b": {"correct": 0, "best_ms": None, "eager_ms": 4.0, "compile_ms": 2.0, "max_autotune_ms": None,
              "roofline": None},
        "c": {"correct": 1, "best_ms": 3.0, "eager_ms": 3.0, "compile_ms": None, "roofline":
              {"fraction": 0.4, "bound": "memory"}},
    }
    f = bench.figures(rows)
    assert f["torch_compile_compiles"] == 2 and f["correct_where_compile_compiles"] == 1
    assert f["vs_eager"] == pytest.approx((2.0 * 1.0 * 1.0) ** (1 / 3))
    assert f["vs_compile"] == pytest.approx((1.5 * 0.5) ** 0.5) and f["vs_compile_tasks"] == 2
    assert f["vs_max_autotune"] == pytest.approx(1.2) and f["vs_max_autotune_tasks"] == 1
    assert f["memory_bound_tasks"] == 2 and f["memory_bound_lowest"] == ("c", 0.4)
    assert f["memory_bound_floor_fraction_geomean"] == pytest.approx(math.sqrt(0.36))


def test_the_figures_by_level_and_with_each_task_at_the_faster_of_its_kernel_and_eager(bench):
    rows = {"level1/1_A": {"correct": 1, "best_ms": 4.0, "eager_ms": 2.0, "compile_ms": 2.0},  # kernel slower
            "level1/2_B": {"correct": 1, "best_ms": 1.0, "eager_ms": 3.0, "compile_ms": 2.0},
            "level2/1_C": {"correct": 0, "best_ms": None, "eager_ms": 4.0, "compile_ms": 2.0}}
    f = bench.figures(rows)
    assert f["vs_compile_by_level"]["level1"] == pytest.approx((0.5 * 2.0) ** 0.5)
    assert f["vs_compile_by_level"]["level2"] == pytest.approx(0.5)
    assert f["kernel_or_eager_vs_compile"] == pytest.approx((1.0 * 2.0 * 0.5) ** (1 / 3))


@pytest.mark.parametrize("flags,message", [(["--report-only"], "--report-only: no run in"),
                                           (["--resume"], "--resume: no run in"),
                                           (["--resume", "--report-only"], "choose one")])
def test_resume_and_report_only_need_a_kept_run(bench, tmp_path, monkeypatch, flags, message):
    (tmp_path / "kb" / "level1").mkdir(parents=True)
    (tmp_path / "kb" / "level1" / "1_Problem.py").write_text("")
    monkeypatch.setattr("sys.argv", ["kernelbench_sample.py", "--path", str(tmp_path / "kb"), "--levels", "1",
                                     "--keep", str(tmp_path / "keep"), *flags])
    with pytest.raises(SystemExit, match=message):
        bench.main()


def test_a_new_sitting_refuses_a_kept_run(bench, tmp_path, monkeypatch):
    """Without --resume, a sitting into a folder that holds a run would be reported with
    that run's evaluations: refused before any sitting starts."""
    (tmp_path / "kb" / "level1").mkdir(parents=True)
    (tmp_path / "kb" / "level1" / "1_Problem.py").write_text("")
    (tmp_path / "keep" / "run").mkdir(parents=True)
    (tmp_path / "keep" / "run" / "run.json").write_text("{}")

    def no_sitting(*args, **kwargs):
        raise AssertionError("a sitting started")

    monkeypatch.setattr(bench.subprocess, "run", no_sitting)
    monkeypatch.setattr("sys.argv", ["kernelbench_sample.py", "--path", str(tmp_path / "kb"), "--levels", "1",
                                     "--keep", str(tmp_path / "keep")])
    with pytest.raises(SystemExit, match="holds a run already"):
        bench.main()


def test_baselines_only_times_the_sample_without_a_run(bench, tmp_path, monkeypatch):
    for n in (1, 2, 3):
        (tmp_path / "kb" / "level1").mkdir(parents=True, exist_ok=True)
        (tmp_path / "kb" / "level1" / f"{n}_Problem.py").write_text("")
    timed = []

    def fake_fill(rows, tasks_dir, *, device, max_autotune, default_mode=True):
        timed.append((sorted(rows), sorted(p.name for p in (tasks_dir / "level1").iterdir()), max_autotune,
                      default_mode))
        for row in rows.values():
            row.update(eager_ms=2.0, max_autotune_ms=1.0)

    def no_sitting(*args, **kwargs):
        raise AssertionError("--baselines-only started a sitting")

    monkeypatch.setattr(bench, "fill_baselines", fake_fill)
    monkeypatch.setattr(bench.subprocess, "run", no_sitting)
    out = tmp_path / "baselines.json"
    monkeypatch.setattr("sys.argv", ["kernelbench_sample.py", "--path", str(tmp_path / "kb"), "--levels", "1",
                                     "--every", "2", "--baselines-only", "--max-autotune", "--out", str(out)])
    assert bench.main() == 0
    # every 2nd problem, max-autotune's baselines alone (the run's judge times the default mode's)
    assert timed == [(["level1/1_Problem", "level1/3_Problem"], ["1_Problem.py", "3_Problem.py"], True, False)]
    assert json.loads(out.read_text())["baselines"]["level1/3_Problem"]["max_autotune_ms"] == 1.0


def test_eager_times_that_disagree_with_the_runs_are_listed(bench):
    rows = {"same": {"correct": 1, "best_ms": 1.0, "eager_ms": 2.0, "eager_beside_max_autotune_ms": 2.1},
            "slow_in_run": {"correct": 1, "best_ms": 1.0, "eager_ms": 6.2, "eager_beside_max_autotune_ms": 2.6},
            "unchecked": {"correct": 1, "best_ms": 1.0, "eager_ms": 2.0}}
    assert bench.figures(rows)["eager_disagreements"] == {"slow_in_run": round(6.2 / 2.6, 3)}


def test_speedups_over_eager_take_the_faster_of_the_two_eager_times(bench):
    """An eager baseline timed slow in the run would flatter the kernels measured against
    it: where eager was timed again beside max-autotune, the faster time is the one used,
    and what each timing launched is listed beside the disagreement."""
    rows = {"slow_in_run": {"correct": 1, "best_ms": 1.0, "eager_ms": 6.0, "eager_beside_max_autotune_ms": 3.0,
                            "eager_kernels": [["implicit_gemm_slow", 5000.0, 1]],
                            "eager_kernels_beside_max_autotune": [["implicit_gemm_fast", 2500.0, 1]]},
            "slow_beside": {"correct": 0, "best_ms": None, "eager_ms": 2.0, "eager_beside_max_autotune_ms": 4.0,
                            "compile_ms": 1.0}}
    f = bench.figures(rows)
    # 3.0 / 1.0 for the first; the second has no kernel, so it runs at eager's (faster) time
    assert f["vs_eager"] == pytest.approx(math.sqrt(3.0 * 1.0))
    assert f["vs_compile"] == pytest.approx(0.5) and f["vs_compile_tasks"] == 1
    assert set(f["eager_disagreements"]) == {"slow_in_run", "slow_beside"}
    assert f["eager_disagreement_kernels"]["slow_in_run"] == {
        "run": [["implicit_gemm_slow", 5000.0, 1]], "beside_max_autotune": [["implicit_gemm_fast", 2500.0, 1]]}


def test_slowest_kernels_of_a_baselines_profile(bench):
    summary = {"kernels": 4, "kernel_times_us": [["a", 9.0, 1], ["b", 5.0, 2], ["c", 1.0, 1], ["d", 0.5, 1]]}
    assert bench.slowest_kernels(summary) == [["a", 9.0, 1], ["b", 5.0, 2], ["c", 1.0, 1]]
    assert bench.slowest_kernels(None) == [] and bench.slowest_kernels({}) == []


@pytest.mark.parametrize("max_autotune", [False, True])
def test_a_report_without_max_autotune_says_it_was_not_timed(bench, tmp_path, monkeypatch, capsys, max_autotune):
    (tmp_path / "kb" / "level1").mkdir(parents=True)
    (tmp_path / "kb" / "level1" / "1_Problem.py").write_text("")
    (tmp_path / "keep" / "run").mkdir(parents=True)
    (tmp_path / "keep" / "run" / "run.json").write_text("{}")
    row = {"correct": 1, "evaluations": 1, "best_ms": 1.0, "eager_ms": 2.0, "compile_ms": 1.5, "won_by": "template"}
    monkeypatch.setattr(bench, "task_rows", lambda run_dir, ids: {task_id: dict(row) for task_id in ids})
    monkeypatch.setattr(bench, "fill_baselines", lambda rows, tasks_dir, *, device, max_autotune: None)
    monkeypatch.setattr("sys.argv", ["kernelbench_sample.py", "--path", str(tmp_path / "kb"), "--levels", "1",
                                     "--keep", str(tmp_path / "keep"), "--report-only",
                                     *(["--max-autotune"] if max_autotune else [])])
    assert bench.main() == 0
    out = capsys.readouterr().out
    assert "level1/1_Problem: 1/1 correct; 2.00x eager, 1.50x torch.compile" in out
    assert ("max-autotune: not timed" in out) is not max_autotune


def test_a_task_without_a_correct_kernel_says_why_its_evaluations_failed(bench, tmp_path):
    from foundry.store.evallog import EvaluationLog
    from foundry.types import Candidate, EvalResult, Stage
    log = EvaluationLog(tmp_path)
    judged = [("level1/1_A", "evaluator error: OutOfMemoryError: CUDA out of memory\nmore", False),
              ("level1/1_A", "evaluator error: OutOfMemoryError: CUDA out of memory\nagain", False),
              ("level1/1_A", "wrong values: max abs err 3.2", False),
              ("level1/2_B", "wrong values: max abs err 1.0", False),
              ("level1/2_B", "", True)]
    for n, (task_id, error, ok) in enumerate(judged):
        cand = Candidate.make(task_id=task_id, source=f"# {n}", backend="c")
        log.append(cand, EvalResult(candidate_id=cand.candidate_id, task_id=task_id, correct=ok, error=error,
                                    stage=int(Stage.CORRECT if ok else Stage.RUNTIME), runtime_ms=1.0 if ok else None,
                                    device="cpu", hardware="cpu:test"))
    log.close()
    rows = bench.task_rows(tmp_path, ["level1/1_A", "level1/2_B"])
    assert rows["level1/1_A"]["failures"] == ["evaluator error: OutOfMemoryError: CUDA out of memory",
                                              "wrong values: max abs err 3.2"]
    assert rows["level1/2_B"]["correct"] == 1 and "failures" not in rows["level1/2_B"]


def test_the_throughput_block_sums_the_judges_phases_over_the_run(bench, tmp_path):
    from foundry.store.evallog import EvaluationLog
    from foundry.types import Candidate, EvalResult, Stage
    log = EvaluationLog(tmp_path)
    phases = [("level1/1_A", {"task_setup": 2.0, "degeneracy": 3.0, "trials": 1.0}),
              ("level1/1_A", {"trials": 1.5, "timing": 0.5}),
              ("level1/2_B", {"task_setup": 1.0, "baseline_eager": 1.0, "trials": 2.0})]
    for n, (task_id, seconds) in enumerate(phases):
        cand = Candidate.make(task_id=task_id, source=f"# {n}", backend="c")
        log.append(cand, EvalResult(candidate_id=cand.candidate_id, task_id=task_id, correct=True, runtime_ms=1.0,
                                    stage=int(Stage.CORRECT), device="cpu", hardware="cpu:test",
                                    metrics={"phases": seconds}))
    log.close()
    t = bench.throughput(tmp_path)
    assert t["evaluations"] == 3 and t["phases_evaluations"] == 3
    assert t["phases_s"] == {"trials": 4.5, "degeneracy": 3.0, "task_setup": 3.0, "baseline_eager": 1.0, "timing": 0.5}
    assert list(t["phases_s"])[0] == "trials"  # longest first
    # first-time setup: level1/1_A 5 s, level1/2_B 2 s
    assert t["first_time_setup_median_s"] == 3.5 and t["first_time_setup_longest"] == ["level1/1_A", 5.0]


def test_a_baseline_that_failed_is_printed_and_kept_with_why(bench, tmp_path, monkeypatch, capsys):
    import foundry.evaluate
    import foundry.tasks.loader
    from foundry.evaluate.baselines import Baseline

    class Judge:  # the judge's baseline step: level1/45 fails, level1/5 is timed
        def __init__(self, *, config):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def baseline(self, *, task, measure):
            if task == "level1/45_Pool":
                return Baseline(eager_ms=None, error="Traceback ...\n  File x\ntorch.OutOfMemoryError: CUDA out of "
                                                     "memory. Tried to allocate 16.00 GiB\n")
            return Baseline(eager_ms=2.0, compile_ms=1.0, error="")

    monkeypatch.setattr(foundry.evaluate, "Evaluator", Judge)
    monkeypatch.setattr(foundry.tasks.loader, "load_task", lambda path, profile: f"level1/{path.stem}")
    rows = {"level1/45_Pool": {}, "level1/5_Scale": {}}
    bench.fill_baselines(rows, tmp_path / "level1", device="cpu", max_autotune=False)
    why = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 16.00 GiB"
    assert rows["level1/45_Pool"]["baseline_error"] == why and rows["level1/45_Pool"]["eager_ms"] is None
    assert "baseline_error" not in rows["level1/5_Scale"] and rows["level1/5_Scale"]["compile_ms"] == 1.0
    out = capsys.readouterr().out
    assert "baselines level1/45_Pool: eager None, compile_ms None (" in out and out.count(why) == 1
