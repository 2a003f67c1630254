"""Kernel quality per task: eager, torch.compile, the best kernel found, the roofline floor.

For every task: the reference's eager time, torch.compile's time (and compile seconds),
the best kernel of a run directory (`--run-dir RUN/`, reading `RUN/best/<task>.py`),
the roofline floor and each one's fraction of it; then fast_p (p = 1, 1.5, 2) against
eager and against torch.compile and geometric means. Prints a table and writes
`quality.json` and `quality.md` under `--out`.

Timing: GPU: CUDA events, a whole-device synchronize, an L2 flush (writing a buffer of
at least twice the L2) before each trial, warm-up, median of N trials. CPU: the same
with a monotonic clock and a fixed thread count. Every task runs in a worker process with
a deadline per phase; a failure, crash or timeout is recorded for that task and the
worker is replaced, so one task never stops the run. The best kernel's output is checked
by the judge's comparison (the task's tolerance, else its dtype's); torch.compile's by a
loose agreement check (1e-2).

    python benchmarks/quality.py --device cpu --profile small --out out/quality
    python benchmarks/quality.py --device cuda --profile full --out out/quality-h200
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import multiprocessing as mp
import os
import platform
import queue
import re
import sys
import threading
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # quality_worker, beside this script
sys.path.append(str(Path(__file__).resolve().parents[1]))  # foundry from a source tree, if not installed

from foundry.tasks.roofline import DeviceCeilings, roofline_for_task  # noqa: E402
from foundry.tasks.suite import load_suite, resolve_profile  # noqa: E402
from foundry.types import Task  # noqa: E402
from quality_worker import DeviceLock, Worker, err_text  # noqa: E402

PS = (1.0, 1.5, 2.0)


# ----------------------------------------------------------------------------- summary

def _geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x is not None and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def _ms(entry: dict | None, need: str | None = None) -> float | None:
    if not entry or "ms" not in entry or (need and not entry.get(need)):
        return None
    return entry["ms"]


def task_row(task: Task, roof: dict, measured: dict) -> dict:
    """One task's figures: times, speedups and fractions of the roofline floor."""
    r = measured["results"]
    eager, compiled = _ms(r.get("eager")), _ms(r.get("compile"))
    best = _ms(r.get("best"), need="correct")
    floor = roof.get("floor_ms")

    def ratio(a, b):
        return a / b if a is not None and b is not None and b > 0 else None

    return {
        "task_id": task.task_id, "level": task.level, "profile": task.size_profile,
        "eager": r.get("eager"), "compile": r.get("compile"), "best": r.get("best"), "roofline": roof,
        "eager_ms": eager, "compile_ms": compiled, "best_ms": best,
        "compile_vs_eager": ratio(eager, compiled), "best_vs_eager": ratio(eager, best),
        "best_vs_compile": ratio(compiled, best),
        "floor_fraction": {k: ratio(floor, v) for k, v in (("eager", eager), ("compile", compiled), ("best", best))},
        "error": measured.get("error"),
    }


def summarize(rows: list[dict], *, have_best: bool) -> dict:
    """fast_p (fraction of all tasks that are correct and more than p times faster) and
    geometric means (speedups over tasks where both exist; floor fractions capped at 1)."""
    n = len(rows)

    def fast(key: str) -> dict:
        return {str(p): (sum(1 for r in rows if r[key] is not None and r[key] > p) / n if n else None) for p in PS}

    out = {"tasks": n, "fast_p": {"compile_vs_eager": fast("compile_vs_eager")}, "geomean": {}}
    if have_best:
        out["fast_p"]["best_vs_eager"] = fast("best_vs_eager")
        out["fast_p"]["best_vs_compile"] = fast("best_vs_compile")
    for key in ("compile_vs_eager", "best_vs_eager", "best_vs_compile"):
        vals = [r[key] for r in rows if r[key] is not None]
        out["geomean"][key] = {"value": _geomean(vals), "tasks": len(vals)}
    for who in ("eager", "compile", "best"):
        vals = [min(1.0, r["floor_fraction"][who]) for r in rows if r["floor_fraction"][who] is not None]
        out["geomean"][f"{who}_floor_fraction"] = {"value": _geomean(vals), "tasks": len(vals)}
    out["failures"] = {who: sum(1 for r in rows if (r[who] or {}).get("error")) for who in ("eager", "compile", "best")}
    return out


def _f(x: float | None, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def table(rows: list[dict], summary: dict) -> str:
    lines = ["| task | eager ms | compile ms | best ms | floor ms | bound | eager/floor | compile/floor "
             "| best/floor | compile vs eager | best vs eager | best vs compile | note |",
             "|" + " --- |" * 13]
    for r in rows:
        ff = r["floor_fraction"]
        notes = [f"{k}: {(r[k] or {}).get('error')}" for k in ("eager", "compile", "best") if (r[k] or {}).get("error")]
        if r["best"] and "correct" in r["best"] and not r["best"]["correct"]:
            notes.append(f"best incorrect (max abs err {r['best']['max_abs_err']:.2e})")
        note = "; ".join(notes).replace("|", "/")[:160]
        lines.append(f"| {r['task_id']} | {_f(r['eager_ms'], '.4f')} | {_f(r['compile_ms'], '.4f')} "
                     f"| {_f(r['best_ms'], '.4f')} | {_f(r['roofline'].get('floor_ms'), '.4f')} "
                     f"| {r['roofline'].get('bound', '-')} | {_f(ff['eager'], '.2f')} | {_f(ff['compile'], '.2f')} "
                     f"| {_f(ff['best'], '.2f')} | {_f(r['compile_vs_eager'], '.2f')} | {_f(r['best_vs_eager'], '.2f')} "
                     f"| {_f(r['best_vs_compile'], '.2f')} | {note} |")
    lines += ["", "| summary | value | tasks |", "| --- | --- | --- |"]
    for k, v in summary["geomean"].items():
        lines.append(f"| geomean {k} | {_f(v['value'], '.3f')} | {v['tasks']} |")
    for k, v in summary["fast_p"].items():
        for p, frac in v.items():
            lines.append(f"| fast_{p} {k} | {_f(frac, '.3f')} | {summary['tasks']} |")
    lines.append(f"| failures (eager / compile / best) | {summary['failures']['eager']} / "
                 f"{summary['failures']['compile']} / {summary['failures']['best']} | {summary['tasks']} |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- main

def best_file(run_dir: Path, task_id: str) -> Path:
    """`RUN/best/<task>.py`, the run directory's naming (`level1/19_ReLU` stays a path)."""
    parts = [re.sub(r"[^A-Za-z0-9_.-]", "_", p) for p in task_id.split("/") if p not in ("", ".", "..")]
    return run_dir / "best" / ("/".join(parts) + ".py")


def select(tasks: list[Task], wanted: str | None) -> list[Task]:
    """`--tasks`: comma-separated task ids, file stems or numeric prefixes."""
    if not wanted:
        return tasks
    keys = [w.strip() for w in wanted.split(",") if w.strip()]
    chosen = [t for t in tasks if any(k in (t.task_id, Path(t.path).stem) or t.task_id.endswith("/" + k)
                                      or (k.isdigit() and Path(t.path).name.split("_")[0].lstrip("0") == k.lstrip("0"))
                                      for k in keys)]
    if not chosen:
        raise SystemExit(f"--tasks {wanted!r} matches none of the {len(tasks)} tasks loaded")
    return chosen


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--path", help="suite / KernelBench checkout / task folder or file (default: the project's suite)")
    ap.add_argument("--level", type=int, action="append", help="level to load (repeatable; default all)")
    ap.add_argument("--ids", help="comma-separated numeric ids within the level")
    ap.add_argument("--tasks", help="comma-separated task ids, stems or numbers to keep")
    ap.add_argument("--limit", type=int, help="first N tasks only")
    ap.add_argument("--device", default="cpu", help="cpu | cuda | cuda:N")
    ap.add_argument("--profile", default="auto", choices=("auto", "small", "full"))
    ap.add_argument("--run-dir", type=Path, help="run directory whose best/<task>.py files to time")
    ap.add_argument("--out", type=Path, default=Path("quality-out"), help="folder for quality.json and quality.md")
    ap.add_argument("--json-out", type=Path, help="JSON path (default OUT/quality.json)")
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--max-seconds", type=float, default=3.0, help="stop a measurement's trials after this long")
    ap.add_argument("--flush-mb", type=int, help="cache-flush buffer in MiB (default: max(2 x L2, 256) on GPU, 32 on CPU)")
    ap.add_argument("--threads", type=int, help="CPU threads for torch in the worker")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--compile-backend", default="inductor")
    ap.add_argument("--compile-mode", default=None, help="torch.compile mode (default: its default)")
    ap.add_argument("--compile-timeout", type=float, default=90.0, help="seconds for one task's compile + timing")
    ap.add_argument("--task-timeout", type=float, default=60.0, help="seconds for one task's eager / best phase")
    ap.add_argument("--bandwidth", type=float, help="copy bandwidth in bytes/s (default: measured)")
    ap.add_argument("--flop-rate", type=float, help="FLOP/s (default: measured)")
    ap.add_argument("--workers", type=int, default=1,
                    help="worker processes: compiles overlap, measurements never do (default 1)")
    ap.add_argument("--budget-s", type=float, help="after this many seconds, skip torch.compile for the remaining tasks")
    ap.add_argument("--h200-ceilings", action="store_true", help="use the H200 anchor ceilings instead of measuring")
    return ap.parse_args(argv)


def _environment(device: str) -> dict:
    env = {"python": platform.python_version(), "torch": torch.__version__, "machine": platform.machine(),
           "cpu_count": os.cpu_count(), "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    try:
        import triton
        env["triton"] = triton.__version__
    except Exception:  # noqa: BLE001 - optional
        env["triton"] = None
    if device.startswith("cuda") and torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name(torch.device(device))
    return env


def _ceilings(args: argparse.Namespace, worker: "Worker", deadlines: dict) -> DeviceCeilings:
    if args.bandwidth or args.flop_rate or args.h200_ceilings:
        base = DeviceCeilings()
        return DeviceCeilings(bandwidth_bytes_per_s=args.bandwidth or base.bandwidth_bytes_per_s,
                              flops_per_s=args.flop_rate or base.flops_per_s,
                              source="given" if (args.bandwidth or args.flop_rate) else base.source)
    got = worker.run({"kind": "ceilings", "device": args.device}, deadlines)
    c = got["results"].get("ceilings")
    if not c or "error" in c:
        raise SystemExit(f"could not measure the device's ceilings: {got['error']}")
    return DeviceCeilings(bandwidth_bytes_per_s=c["bandwidth_bytes_per_s"], flops_per_s=c["flops_per_s"],
                          half_flops_per_s=c["half_flops_per_s"], source=c["source"])


def _measure(task: Task, worker: "Worker", args: argparse.Namespace, ceilings: DeviceCeilings,
             deadlines: dict, t_start: float) -> dict:
    try:
        roof = roofline_for_task(task, ceilings=ceilings).__dict__
    except Exception as e:  # noqa: BLE001 - the floor is optional for a row
        roof = {"error": err_text(e)}
    best = best_file(args.run_dir, task.task_id) if args.run_dir else None
    over_budget = args.budget_s is not None and time.monotonic() - t_start > args.budget_s
    job = {"kind": "task", "task": task, "device": args.device, "trials": args.trials,
           "warmup": args.warmup, "max_seconds": args.max_seconds, "flush_mb": args.flush_mb,
           "compile": not args.no_compile and not over_budget, "compile_backend": args.compile_backend,
           "compile_mode": args.compile_mode,
           "best_path": str(best) if best is not None and best.is_file() else None}
    t0 = time.monotonic()
    measured = worker.run(job, deadlines)
    if over_budget and not args.no_compile:
        measured["results"].setdefault("compile", {"error": f"skipped: past --budget-s {args.budget_s:.0f}"})
    row = task_row(task, roof, measured)
    row["wall_s"] = time.monotonic() - t0
    return row


def _progress(row: dict) -> str:
    comp = row["compile"] or {}
    errors = [f"{k}: {(row[k] or {}).get('error')}" for k in ("eager", "compile", "best") if (row[k] or {}).get("error")]
    return (f"{row['task_id']}: eager {_f(row['eager_ms'], '.4f')} ms, compile {_f(row['compile_ms'], '.4f')} ms "
            f"({_f(comp.get('compile_s'), '.1f')} s to compile), best {_f(row['best_ms'], '.4f')} ms, "
            f"floor {_f(row['roofline'].get('floor_ms'), '.4f')} ms  ({row['wall_s']:.1f} s)"
            + (("  ERRORS " + "; ".join(errors)) if errors else ""))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit(f"--device {args.device}: CUDA is not available here")
    profile = resolve_profile(args.profile, device=args.device)
    ids = [int(i) for i in args.ids.split(",")] if args.ids else None
    level = args.level[0] if args.level and len(args.level) == 1 else args.level
    tasks = select(load_suite(path=args.path, level=level, ids=ids, profile=profile), args.tasks)
    if args.limit:
        tasks = tasks[: args.limit]
    ctx = mp.get_context("spawn")
    lock = DeviceLock(ctx)
    workers = [Worker(args.threads, lock) for _ in range(max(1, args.workers))]
    deadlines = {"default": args.task_timeout, "compile": args.compile_timeout}
    t_start = time.monotonic()
    print(f"quality: {len(tasks)} tasks, profile {profile}, device {args.device}, "
          f"{len(workers)} worker(s)", flush=True)
    try:
        ceilings = _ceilings(args, workers[0], deadlines)
        print(f"ceilings: {ceilings.bandwidth_bytes_per_s / 1e9:.1f} GB/s copy, "
              f"{ceilings.flops_per_s / 1e12:.2f} TFLOP/s ({ceilings.source})", flush=True)
        rows: list[dict | None] = [None] * len(tasks)
        pending = queue.Queue()
        for i in range(len(tasks)):
            pending.put(i)
        done = [0]
        print_lock = threading.Lock()

        def serve(worker: Worker) -> None:
            while True:
                try:
                    i = pending.get_nowait()
                except queue.Empty:
                    return
                rows[i] = _measure(tasks[i], worker, args, ceilings, deadlines, t_start)
                with print_lock:
                    done[0] += 1
                    print(f"[{done[0]}/{len(tasks)}] {_progress(rows[i])}  "
                          f"[{time.monotonic() - t_start:.0f} s total]", flush=True)

        threads = [threading.Thread(target=serve, args=(w,), daemon=True) for w in workers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        for w in workers:
            w.stop()
    rows = [r for r in rows if r is not None]
    summary = summarize(rows, have_best=args.run_dir is not None)
    text = table(rows, summary)
    print(text)
    report = {"environment": _environment(args.device), "args": {k: str(v) for k, v in vars(args).items()},
              "profile": profile, "ceilings": ceilings.__dict__, "summary": summary, "tasks": rows,
              "wall_s": time.monotonic() - t_start}
    args.out.mkdir(parents=True, exist_ok=True)
    json_path = args.json_out or args.out / "quality.json"
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(report, indent=1, default=str))
    (args.out / "quality.md").write_text(text + "\n")
    print(f"wrote {json_path} and {args.out / 'quality.md'} ({report['wall_s']:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
