"""The offline search (llm=none) against torch.compile on a fixed sample of KernelBench
problems at their published sizes: what the judge found per task, and the geometric means
over the whole sample.

    python benchmarks/kernelbench_sample.py [--path ../shared/kernelbench] [--every 4]
        [--offset 0 | --seed S [--count 40]] [--levels 1 2] [--wall-s 540] [--keep DIR] [--resume | --report-only | --baselines-only]
        [--max-autotune] [--only LEVEL/NUMBER ...] [--override key=value ...] [--out sample.json]

The sample: of each level's problem files present in `--path`, ordered by problem number,
every `--every`-th starting with the `--offset`-th (0: the first; every 4th of levels 1 and
2: 40 problems, and offsets 0 to 3 give four disjoint samples), or with `--seed S` a random
`--count` of all the levels' problems drawn with that seed;
`--only 1/21 1/41 ...` keeps those of the sample alone (figures over them only). The main
job runs on it (`python -m foundry tasks=kernelbench ... llm=none`, its default search:
compiler seeds, templates, tuning); `--resume` continues the run kept in `--keep`
(`resume=<run dir>`), so a sample larger than one sitting is judged over several;
`--report-only` runs no sitting and reports the run kept in `--keep` (e.g. to time
max-autotune's baselines on their own); `--baselines-only` needs no run: it times the
sample's baselines into the judge's disk cache (with `--max-autotune`, max-autotune's
alone), so a later sitting's report on the same machine finds them there (max-autotune
takes 6-40 s a problem at published sizes on an H200: level by level, with `--levels`, it
fits a call of a few minutes). Then, in this process, on the same machine:

- every task's eager and torch.compile (default mode) baselines, through the judge
  (cached on disk: the run's own where it measured them; a task whose every candidate
  failed gets them here);
- with `--max-autotune`, torch.compile with `mode="max-autotune"` timed by the judge too
  (its own cache key), with eager beside it: a task whose eager time there differs from
  the run's by over 10% is listed (`eager_disagreements`, the run's over this one, with
  the slowest kernels each of the two eager timings launched), and the speedups over
  eager are taken against the faster of the two.

Reported (stdout, `--out` JSON): per task the best correct kernel's speedups, what won it,
its roofline position, and for a task without one why its evaluations failed; coverage
(tasks with a correct kernel among those torch.compile compiles); geometric means over
the whole sample against eager, torch.compile and max-autotune, a task without a correct
kernel counted at eager's time; the geometric mean of the memory-bound tasks' fractions
of their roofline floor, and the lowest; where the judge's time went over the whole run
(`throughput`: judged per minute, seconds per phase, a task's first-time setup).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from kernelbench_throughput import link_problems  # noqa: E402


def problem_numbers(path: Path, level: int) -> list[int]:
    """The problem numbers of `path`'s level folder, in order."""
    folder = path / f"level{level}"
    if not folder.is_dir():
        raise SystemExit(f"no folder {folder}")
    return sorted(int(p.name.split("_", 1)[0]) for p in folder.glob("*_*.py") if p.name.split("_", 1)[0].isdigit())


def sample(path: Path, *, levels: list[int], every: int, offset: int = 0, seed: int | None = None,
           count: int = 40) -> list[str]:
    """`level/number` of every `every`-th problem file of each level by number, starting
    with the `offset`-th; with `seed`, `count` problems of all the levels drawn at random
    with that seed instead (listed by level and number)."""
    if not 0 <= offset < every:
        raise SystemExit(f"--offset must be in [0, --every), got {offset} with --every {every}")
    everything = [(level, n) for level in levels for n in problem_numbers(path, level)]
    if seed is not None:
        if count > len(everything):
            raise SystemExit(f"--count {count}: levels {levels} hold {len(everything)} problems")
        everything = sorted(random.Random(seed).sample(everything, count))
        return [f"{level}/{n}" for level, n in everything]
    return [f"{level}/{n}" for level in levels for n in problem_numbers(path, level)[offset::every]]


def sample_rule(a: argparse.Namespace) -> str:
    """The sample's rule in words (the report's `rule`)."""
    if a.seed is not None:
        return f"{a.count} problems of levels {a.levels} drawn at random with seed {a.seed}"
    return f"every {a.every}th problem of levels {a.levels} by number, from the {ordinal(a.offset + 1)}"


def ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def restrict(problems: list[str], only: list[str]) -> list[str]:
    """`problems` kept to those named in `only` (each `level/number` of the sample)."""
    if not only:
        return problems
    unknown = [o for o in only if o not in problems]
    if unknown:
        raise SystemExit(f"--only: {', '.join(unknown)} not in the sample ({', '.join(problems)})")
    return [p for p in problems if p in only]


def geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def task_rows(run_dir: Path, task_ids: list[str]) -> dict[str, dict]:
    """Per task: its summary figures, for a task without a correct kernel why its
    evaluations failed (`failures`: TaskSummary.failures), and where a baseline time is
    missing the last line of why (`baseline_error`)."""
    from foundry.store import read_evaluations
    from foundry.store.summary import summarize
    summaries = summarize(read_evaluations(run_dir), task_ids=task_ids)
    return {t: {"evaluations": s.evaluations, "correct": s.correct, "best_ms": s.best_runtime_ms,
                "eager_ms": s.eager_ms, "compile_ms": s.compile_ms, "won_by": s.best_strategy,
                "roofline": {k: (s.best_roofline or {}).get(k) for k in ("fraction", "bound", "floor_ms")}
                if s.best_roofline else None,
                **({"failures": list(s.failures)} if not s.correct else {}),
                **({"baseline_error": s.baseline_error} if s.baseline_error else {})}
            for t, s in summaries.items()}


def throughput(run_dir: Path) -> dict:
    """Where the judge's time went over the whole run (every sitting): judged per minute
    in steady state, seconds per phase (longest first), and a task's first-time setup
    (median and longest), as report.md gives them."""
    import statistics

    from foundry.store import read_evaluations
    from foundry.store.phases import PhaseSums, judged_per_minute
    records = read_evaluations(run_dir)
    times: dict[str, list[float]] = {}
    for r in records:
        if r.recorded_at:
            times.setdefault(r.session, []).append(r.recorded_at)
    sums = PhaseSums.of((r.candidate.task_id, r.result) for r in records)
    setup = sums.first_time_setup()
    slowest = max(setup, key=lambda t: setup[t]) if setup else None
    rate = judged_per_minute(times)
    return {"evaluations": len(records), "judged_per_minute": round(rate, 2) if rate is not None else None,
            "phases_s": {name: round(secs, 1) for name, secs in sums.top(len(sums.total_s))},
            "phases_evaluations": sums.evaluations,
            "first_time_setup_median_s": round(statistics.median(setup.values()), 2) if setup else None,
            "first_time_setup_longest": [slowest, round(setup[slowest], 2)] if slowest else None}


def fill_baselines(rows: dict[str, dict], tasks_dir: Path, *, device: str, max_autotune: bool,
                   default_mode: bool = True) -> None:
    """Eager and torch.compile times for every task, through the judge (its disk cache
    first), at the sizes the run used (`tasks.profile=auto`: published on a GPU, small on
    a CPU); with `max_autotune`, also torch.compile(mode="max-autotune"); without
    `default_mode`, not the default mode's."""
    from foundry.evaluate import EvalConfig, Evaluator
    from foundry.store.summary import last_line
    from foundry.tasks.loader import load_task
    profile = "full" if device == "cuda" else "small"
    configs = [("compile_ms", EvalConfig(device=device))] if default_mode else []
    if max_autotune:
        configs.append(("max_autotune_ms", EvalConfig(device=device, compile_mode="max-autotune")))
    for field, config in configs:
        with Evaluator(config=config) as judge:
            side = "eager_kernels" if field == "compile_ms" else "eager_kernels_beside_max_autotune"
            for task_id, row in rows.items():
                known = bool(row.get(field) and row.get("eager_ms"))  # the run's: only its record is read
                t0 = time.monotonic()
                try:
                    task = load_task(tasks_dir / f"{task_id}.py", profile=profile)
                    record = judge.baseline(task=task, measure=not known)
                    if known:
                        if record is not None:
                            row[side] = slowest_kernels(record.eager_kernels)
                        continue
                except Exception as e:  # noqa: BLE001 - one task's failure is reported, the rest go on
                    row[f"{field}_error"] = f"{type(e).__name__}: {e}"[:300]
                    continue
                eager, compiled = record.eager_ms, record.compile_ms
                row["eager_ms"] = row.get("eager_ms") or eager
                row[field] = compiled
                row[side] = slowest_kernels(record.eager_kernels)
                if field == "max_autotune_ms":
                    # eager timed again beside max-autotune, outside the run: a check on the run's
                    row["eager_beside_max_autotune_ms"] = eager
                why = last_line(record.error, limit=300) if eager is None or compiled is None else ""
                if why:
                    row["baseline_error"] = why
                print(f"  baselines {task_id}: eager {eager}, {field} {compiled} "
                      f"({time.monotonic() - t0:.1f} s){': ' + why if why else ''}", flush=True)


def slowest_kernels(summary: dict | None, count: int = 3) -> list:
    """[name, device microseconds, launches] of the slowest kernels of a baseline's profile
    (what a library call chose shows in its kernels' names)."""
    return list((summary or {}).get("kernel_times_us") or [])[:count]


EAGER_DISAGREES = 0.1  # a task's two eager times further apart than this are reported


def eager_for_ratios(row: dict) -> float | None:
    """The eager time the speedups over eager are taken against: the run's, or where eager
    was timed again beside max-autotune, the faster of the two (a slow baseline would
    flatter every kernel measured against it)."""
    times = [t for t in (row.get("eager_ms"), row.get("eager_beside_max_autotune_ms")) if t]
    return min(times) if times else None


def speedup_over(row: dict, field: str) -> float | None:
    """The task's best kernel over its `field` baseline ("eager_ms", "compile_ms", ...);
    a task without a correct kernel runs at eager's time."""
    eager, best = eager_for_ratios(row), row.get("best_ms")
    base = eager if field == "eager_ms" else row.get(field)
    if not base:
        return None
    return base / best if best else (base / eager if eager else None)


def figures(rows: dict[str, dict]) -> dict:
    """Coverage, the geometric means and the memory-bound tasks' roofline fractions."""
    out: dict = {"tasks": len(rows)}
    compiles = [t for t, r in rows.items() if r.get("compile_ms")]
    out["torch_compile_compiles"] = len(compiles)
    out["correct_where_compile_compiles"] = sum(1 for t in compiles if rows[t]["correct"])
    for field, name in (("eager_ms", "vs_eager"), ("compile_ms", "vs_compile"), ("max_autotune_ms", "vs_max_autotune")):
        ratios = [x for x in (speedup_over(r, field) for r in rows.values()) if x]
        out[name] = geomean(ratios)
        out[name + "_tasks"] = len(ratios)
    levels = sorted({t.split("/")[0] for t in rows})
    out["vs_compile_by_level"] = {level: geomean([x for t, r in rows.items() if t.split("/")[0] == level
                                                  for x in [speedup_over(r, "compile_ms")] if x])
                                  for level in levels}
    # each task at the faster of its best kernel and eager (what a user keeps): not the
    # issue's figure, which counts a kernel at its own time however slow
    kept = [max(x, r["compile_ms"] / eager_for_ratios(r)) if eager_for_ratios(r) else x
            for r in rows.values() for x in [speedup_over(r, "compile_ms")] if x]
    out["kernel_or_eager_vs_compile"] = geomean(kept)
    # tasks whose eager time beside max-autotune differs by over EAGER_DISAGREES from the run's
    out["eager_disagreements"] = {t: round(r["eager_ms"] / r["eager_beside_max_autotune_ms"], 3)
                                  for t, r in rows.items()
                                  if r.get("eager_ms") and r.get("eager_beside_max_autotune_ms")
                                  and abs(r["eager_ms"] / r["eager_beside_max_autotune_ms"] - 1) > EAGER_DISAGREES}
    # what each of those two eager timings launched, the slowest kernels first
    out["eager_disagreement_kernels"] = {t: {"run": rows[t].get("eager_kernels"),
                                             "beside_max_autotune": rows[t].get("eager_kernels_beside_max_autotune")}
                                         for t in out["eager_disagreements"]}
    memory = {t: r["roofline"]["fraction"] for t, r in rows.items()
              if r.get("roofline") and r["roofline"].get("bound") == "memory" and r["roofline"].get("fraction")}
    out["memory_bound_tasks"] = len(memory)
    out["memory_bound_floor_fraction_geomean"] = geomean(list(memory.values()))
    out["memory_bound_lowest"] = min(memory.items(), key=lambda kv: kv[1]) if memory else None
    return out


def chosen(a: argparse.Namespace) -> list[str]:
    """The sample the arguments choose."""
    return sample(Path(a.path), levels=a.levels, every=a.every, offset=a.offset, seed=a.seed, count=a.count)


def time_baselines(a: argparse.Namespace) -> int:
    """`--baselines-only`: the sample's baselines timed into the judge's disk cache (its
    key is the problem's content, so a run's report finds them), printed and, with
    `--out`, written."""
    problems = restrict(chosen(a), a.only)
    tasks_dir = Path(tempfile.mkdtemp(prefix="kb-baselines-"))
    ids = link_problems(Path(a.path), problems, tasks_dir)
    print(f"{len(ids)} problems ({sample_rule(a)}): baselines only", flush=True)
    rows: dict[str, dict] = {task_id: {} for task_id in ids}
    t0 = time.monotonic()
    fill_baselines(rows, tasks_dir, device=a.device, max_autotune=a.max_autotune, default_mode=not a.max_autotune)
    print(f"baselines of {len(ids)} problems in {time.monotonic() - t0:.0f} s", flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps({"problems": ids, "baselines": rows}, indent=1, default=str))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--path", default=str(ROOT.parent / "shared" / "kernelbench"))
    ap.add_argument("--levels", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--every", type=int, default=4)
    ap.add_argument("--offset", type=int, default=0, help="start the every-Nth rule at this problem (0: the first)")
    ap.add_argument("--seed", type=int, default=None, help="draw --count problems at random with this seed instead")
    ap.add_argument("--count", type=int, default=40, help="problems drawn with --seed")
    ap.add_argument("--wall-s", type=float, default=540.0, help="budget.wall_time_s of this sitting")
    ap.add_argument("--keep", default="", help="folder for the run directory and its log (default: a temp dir)")
    ap.add_argument("--resume", action="store_true", help="continue the run kept in --keep")
    ap.add_argument("--report-only", action="store_true", help="no sitting: report the run kept in --keep")
    ap.add_argument("--baselines-only", action="store_true",
                    help="no run: time the sample's baselines into the judge's disk cache")
    ap.add_argument("--max-autotune", action="store_true", help="also time torch.compile(mode='max-autotune')")
    ap.add_argument("--only", nargs="+", default=[], help="keep these of the sample (level/number, e.g. 1/41)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--override", nargs="*", default=[], help="more Hydra overrides for the main job")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    if a.every < 1:
        raise SystemExit(f"--every must be >= 1, got {a.every}")

    if sum((a.resume, a.report_only, a.baselines_only)) > 1:
        raise SystemExit("--resume, --report-only and --baselines-only: choose one")
    if a.baselines_only:
        return time_baselines(a)
    keep = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="kb-sample-"))
    keep.mkdir(parents=True, exist_ok=True)
    problems = restrict(chosen(a), a.only)
    tasks_dir, run_dir = keep / "tasks", keep / "run"
    if not tasks_dir.exists():
        ids = link_problems(Path(a.path), problems, tasks_dir)
    else:
        ids = sorted(f"{p.parent.name}/{p.stem}" for p in tasks_dir.glob("level*/*.py"))
    print(f"{len(ids)} problems ({sample_rule(a)}): {', '.join(ids)}", flush=True)
    for flag, given in (("--resume", a.resume), ("--report-only", a.report_only)):
        if given and not (run_dir / "run.json").exists():
            raise SystemExit(f"{flag}: no run in {run_dir}")
    if not (a.resume or a.report_only) and (run_dir / "run.json").exists():
        # a new sitting there would be reported with the old run's evaluations
        raise SystemExit(f"--keep {keep}: it holds a run already ({run_dir}); pass --resume to continue it, "
                         f"or an empty folder")
    levels = ",".join(str(v) for v in a.levels)
    cmd = [sys.executable, "-m", "foundry", "tasks=kernelbench", f"tasks.path={tasks_dir}", f"tasks.level=[{levels}]",
           "tasks.ids=null", "llm=none", "budget.evaluations=null", f"budget.wall_time_s={a.wall_s}",
           "run.progress=log", "run.progress_every_s=60",
           *([f"resume={run_dir}"] if a.resume else [f"hydra.run.dir={run_dir}"]), *a.override]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    wall = 0.0
    if not a.report_only:
        t0 = time.monotonic()
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.monotonic() - t0
        with open(keep / "run.log", "a") as log:
            log.write(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
        print(f"main job: exit {proc.returncode} after {wall:.0f} s", flush=True)
        if proc.returncode != 0:
            print(proc.stdout[-2000:] + proc.stderr[-3000:], flush=True)
    rows = task_rows(run_dir, ids)
    fill_baselines(rows, tasks_dir, device=a.device, max_autotune=a.max_autotune)
    result = {"problems": ids, "rule": sample_rule(a),
              "wall_s": round(wall, 1), "figures": figures(rows), "throughput": throughput(run_dir), "per_task": rows}
    print(json.dumps(result["figures"], indent=1, default=str), flush=True)
    print("throughput: " + json.dumps(result["throughput"], default=str), flush=True)
    if not a.max_autotune:
        print("max-autotune: not timed (pass --max-autotune; `--baselines-only --max-autotune` on the same "
              "machine first caches its baselines, which take minutes)", flush=True)
    for task_id, r in rows.items():
        eager = eager_for_ratios(r)
        best = f"{eager / r['best_ms']:.2f}x eager" if r.get("best_ms") and eager else "no kernel"
        vs_c = f", {r['compile_ms'] / r['best_ms']:.2f}x torch.compile" if r.get("best_ms") and r.get("compile_ms") \
            else ""
        print(f"  {task_id}: {r['correct']}/{r['evaluations']} correct; {best}{vs_c}; won by {r['won_by']}",
              flush=True)
        for line in r.get("failures", []):
            print(f"      failed: {line}", flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
