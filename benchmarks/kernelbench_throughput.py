"""Judged candidates per minute per GPU: the real main job (Ray, llm=none, the template
engine and tuner, the sandboxed judge) on KernelBench problems at their published sizes.

    python benchmarks/kernelbench_throughput.py [--path ../shared/kernelbench]
        [--problems 1/21 1/24 ...] [--wall-s 240] [--runs 2] [--checkout DIR]
        [--override key=value ...] [--then key=value ...] [--out throughput.json] [--keep DIR]

The chosen problem files are linked into a temporary folder (`levelN/` kept, so task ids
stay `levelN/<name>`), and the main job, `python -m foundry +exp=kernelbench
tasks=kernelbench tasks.path=<that folder>` (its settings: two islands, tuning with
`templates.tune_budget=6`, one evaluator per GPU with its default lanes), runs on it
`--runs` times in a row: the first pays each task's first-time setup
(baselines, degeneracy, compiles: cached on disk), the later ones show the steady state.
Per run: evaluations recorded, the rate over the whole run and in the steady state (the
middle 80% of evaluations by their log timestamps), a tuned candidate counted once; the
driver's wall time against its budget; the judge's phases (and the workers' start split
into device setup and inputs) summed over the run's results; the lanes' use, and the
lane-seconds the dispatcher had nothing queued for them (`starved_s`); how many results
ran in a child forked ahead (`forked_ahead`, with `evaluator.standby=true`); how many of the
elites the islands hold at the end carry hardware metrics (GPU runs profile each elite:
`run.profile_elites`, `run.ncu_share`).
`--checkout DIR` runs another checkout's `python -m foundry` (e.g. an older commit) on
the same problems, for a before/after comparison in one invocation; `--then KEY=VALUE ...`
adds one run with those overrides after the others (e.g. `evaluator.standby=true`), an
A/B of one setting on the same machine.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# level-1 pointwise, softmax, norm, reduction, scan and loss problems and level-2 GEMM
# chains that the template engine covers and the judge does not find degenerate; eager
# times 2-9 ms each on an H200
DEFAULT_PROBLEMS = ["1/21", "1/24", "1/26", "1/29", "1/39", "1/40", "1/47", "1/89",
                    "2/12", "2/29", "2/76", "2/86"]


def link_problems(src: Path, problems: list[str], dest: Path) -> list[str]:
    """Symlink `level/number` problems of `src` into `dest/levelN/`; their task ids."""
    ids = []
    for spec in problems:
        level, number = spec.split("/")
        folder = src / f"level{level}"
        matches = sorted(p for p in folder.glob("*_*.py") if p.name.split("_", 1)[0].isdigit()
                         and int(p.name.split("_", 1)[0]) == int(number))
        if not matches:
            raise SystemExit(f"no problem {spec} in {folder}")
        (dest / f"level{level}").mkdir(parents=True, exist_ok=True)
        (dest / f"level{level}" / matches[0].name).symlink_to(matches[0].resolve())
        ids.append(f"level{level}/{matches[0].stem}")
    return ids


def elite_profiles(run_dir: Path) -> dict:
    """How many of the run's elites (the candidates its islands' last checkpoints hold,
    each counted once) carry hardware metrics, by where they came from, with why those
    without Nsight Compute counters went without (their notes, counted)."""
    from foundry.store.rundir import RunDir
    from foundry.types import EvalResult
    from islands.checkpoint import read_checkpoint
    hardware: dict[str, dict] = {}
    for path in sorted(RunDir(run_dir).checkpoints.glob("island-*/**/*.ckpt")):
        for elite in read_checkpoint(path=path)["archive"]["elites"]:
            metrics = EvalResult.from_row(elite["result"]).metrics or {}
            hardware[elite["candidate"]["candidate_id"]] = metrics.get("hardware") or {}
    sources = collections.Counter(h.get("source", "?") for h in hardware.values() if h)
    profiled = sum(sources.values())
    seconds = [float(h.get("profile_s", 0.0)) for h in hardware.values() if h]
    notes = collections.Counter(re.sub(r"\d+", "N", str(h.get("note") or ""))[:120]
                                for h in hardware.values() if h and h.get("source") != "ncu")
    return {"elites": len(hardware), "with_hardware": profiled, "by_source": dict(sources), "notes": dict(notes),
            "fraction": round(profiled / len(hardware), 3) if hardware else None,
            "profile_s_total": round(sum(seconds), 2)}



def _summed(records, key: str) -> dict[str, float]:
    """metrics[key] (a dict of seconds by part) summed over `records`."""
    total: dict[str, float] = {}
    for r in records:
        for k, v in ((r.result.metrics or {}).get(key) or {}).items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                total[k] = total.get(k, 0.0) + float(v)
    return total


def summarize(run_dir: Path, *, wall_s: float, budget_s: float) -> dict:
    from foundry.store import read_evaluations
    records = read_evaluations(run_dir)
    meta = json.loads((run_dir / "run.json").read_text()) if (run_dir / "run.json").exists() else {}
    times = sorted(r.recorded_at for r in records)
    n = len(times)
    steady = float("nan")
    if n >= 10 and times[(9 * n) // 10] > times[n // 10]:
        steady = 60 * 0.8 * n / (times[(9 * n) // 10] - times[n // 10])
    phases = _summed(records, "phases")
    tuning = _summed(records, "tuning_parts_s")  # the tuned results' screens and finalists, by part
    starts = _summed(records, "worker_start_parts_s")  # the workers' device setup and input generation
    gate = {"waited": 0.0, "stopped": 0.0}  # lanes: the recorded evaluations' waits for the device
    for r in records:
        for k, v in ((r.result.metrics or {}).get("device_gate_s") or {}).items():
            if k in gate and isinstance(v, (int, float)):
                gate[k] += float(v)
    per_task: dict[str, dict] = {}
    for r in records:
        t = per_task.setdefault(r.result.task_id, {"evaluations": 0, "correct": 0, "best_speedup_eager": None,
                                                   "best_speedup_compile": None})
        t["evaluations"] += 1
        t["correct"] += int(r.result.correct)
        for key, value in (("best_speedup_eager", r.result.speedup_eager),
                           ("best_speedup_compile", r.result.speedup_compile)):
            if r.result.correct and value and (t[key] is None or value > t[key]):
                t[key] = value
    first_to_last = times[-1] - times[0] if n > 1 else 0.0
    evaluators = json.loads((run_dir / "evaluators.json").read_text()) if (run_dir / "evaluators.json").exists() else []
    lanes = sum(int(e.get("lanes", 0)) for e in evaluators)
    spans = [(m["lane"]["started_at"], m["lane"]["started_at"] + m["lane"]["busy_s"])
             for m in ((r.result.metrics or {}) for r in records) if isinstance(m.get("lane"), dict)]
    busy = sum(b - a for a, b in spans)
    window = (max(b for _, b in spans) - min(a for a, _ in spans)) if spans else 0.0
    # the dispatcher's count of lane-seconds with nothing queued (the islands not keeping lanes fed)
    dispatch = (meta.get("sessions") or [{}])[-1].get("dispatch") or {}
    starved = sum(float(w.get("starved_s") or 0.0) for w in (dispatch.get("workers") or {}).values())
    utilization = {"lanes": lanes, "busy_s_recorded": round(busy, 2), "window_s": round(window, 2),
                   "busy_fraction": round(busy / (lanes * window), 3) if lanes and window else None,
                   "starved_s": round(starved, 2) if dispatch else None,
                   "evaluators": [{k: e.get(k) for k in ("name", "lanes", "busy_s", "evaluated", "gate")}
                                  for e in evaluators]}
    return {"evaluations": n, "correct": sum(r.result.correct for r in records),
            "per_min_steady": steady, "per_min_whole_run": 60 * n / wall_s if wall_s else float("nan"),
            "per_min_first_to_last": 60 * (n - 1) / first_to_last if first_to_last else float("nan"),
            "wall_s": wall_s, "budget_s": budget_s, "over_budget_s": wall_s - budget_s,
            "stop_reason": meta.get("stop_reason"), "gpus": meta.get("gpus"),
            "stop_s": (meta.get("sessions") or [{}])[-1].get("stop_s"),
            "judged_per_min": (meta.get("sessions") or [{}])[-1].get("judged_per_min"),
            "phases_s": {k: round(v, 2) for k, v in sorted(phases.items(), key=lambda kv: -kv[1])},
            "tuning_parts_s": {k: round(v, 2) for k, v in sorted(tuning.items())},
            "worker_start_parts_s": {k: round(v, 2) for k, v in sorted(starts.items())},
            "device_gate_s": {k: round(v, 2) for k, v in gate.items()},
            # results whose final job ran in a child forked before it came (evaluator.standby)
            "forked_ahead": sum(bool((r.result.metrics or {}).get("forked_ahead")) for r in records),
            "lanes": utilization,
            "elite_profiles": elite_profiles(run_dir),
            "tasks": per_task}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--path", default=str(ROOT.parent / "shared" / "kernelbench"))
    ap.add_argument("--problems", nargs="+", default=DEFAULT_PROBLEMS, help="level/number")
    ap.add_argument("--wall-s", type=float, default=240.0, help="budget.wall_time_s of each run")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--checkout", default=str(ROOT), help="the checkout whose `python -m foundry` runs")
    ap.add_argument("--override", nargs="*", default=[], help="more Hydra overrides")
    ap.add_argument("--exp", nargs="*", default=["+exp=kernelbench"],
                    help="the experiment the run starts from (its tasks are replaced by the problems)")
    ap.add_argument("--out", default="")
    ap.add_argument("--keep", default="", help="folder for the runs' directories and logs (default: a temp dir)")
    ap.add_argument("--then", nargs="*", default=[], metavar="KEY=VALUE",
                    help="after the runs, one more run with these overrides added (caches as the runs left "
                         "them): an A/B of one setting on one machine in one invocation")
    a = ap.parse_args()

    tmp = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="kb-problems-"))
    tmp.mkdir(parents=True, exist_ok=True)
    ids = link_problems(Path(a.path), a.problems, tmp / "tasks")
    print(f"{len(ids)} problems: {', '.join(ids)}", flush=True)
    levels = ",".join(sorted({spec.split("/")[0] for spec in a.problems}, key=int))
    checkout = Path(a.checkout).resolve()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(checkout), os.environ.get("PYTHONPATH", "")])}
    runs = []
    plan = [list(a.override)] * a.runs + ([[*a.override, *a.then]] if a.then else [])
    for k, overrides in enumerate(plan):
        run_dir = tmp / f"run{k}"
        cmd = [sys.executable, "-m", "foundry", *a.exp, "tasks=kernelbench", f"tasks.path={tmp / 'tasks'}",
               f"tasks.level=[{levels}]", "tasks.ids=null", "budget.evaluations=100000",
               f"budget.wall_time_s={a.wall_s}", "run.progress=log", "run.progress_every_s=30",
               f"hydra.run.dir={run_dir}", *overrides]
        t0 = time.monotonic()
        proc = subprocess.run(cmd, cwd=checkout, env=env, capture_output=True, text=True)
        wall = time.monotonic() - t0
        (tmp / f"run{k}.log").write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
        if proc.returncode != 0:
            print(f"run {k} exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}", flush=True)
        summary = summarize(run_dir, wall_s=wall, budget_s=a.wall_s) if (run_dir / "evaluations").exists() \
            else {"evaluations": 0, "wall_s": wall}
        summary.update(run=k, exit_code=proc.returncode, checkout=str(checkout), overrides=overrides)
        runs.append(summary)
        print(json.dumps({key: v for key, v in summary.items() if key != "tasks"}, default=str), flush=True)
        for task, t in sorted(summary.get("tasks", {}).items()):
            print(f"  {task}: {t['evaluations']} evaluations, {t['correct']} correct, best vs eager "
                  f"{t['best_speedup_eager']}, vs compile {t['best_speedup_compile']}", flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps({"problems": ids, "runs": runs}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
