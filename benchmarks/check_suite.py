"""Time the suite's reference forwards at a size profile and run the degeneracy check.

    python benchmarks/check_suite.py                 # the project's suite, small sizes, CPU
    python benchmarks/check_suite.py --path KernelBench --level 1 2 --profile full --device cuda --out flagged.md
    python benchmarks/check_suite.py --path KernelBench --level 1 --ids 1 23 --profile full --device cuda

Prints one row per task as it finishes (forward ms, output shape, verdict, the best
input-independent answer's largest error as a multiple of the tolerance, the inputs the
judge checks differentially with their swap's error / tolerance, check seconds, peak
device memory, reason) and a summary line. A differential input moves the output only
within the tolerance, but by at least the check's floor (0.1x): the task is not
degenerate, and the judge gives its candidates' jobs a paired trial per such input
(guard `input_ignored`). A task that fails (its reference raises, or the check runs out
of memory) is recorded and the run goes on; device memory is freed between tasks.
`--out FILE` (.md or .csv) lists every flagged or failing task, and every task with
differential inputs, with its reason and figures, rewritten after each task. Exits 1 if
any task is degenerate (and not declared DEGENERATE_OK in its file) or fails.
"""

from __future__ import annotations

import argparse
import csv
import gc
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

sys.path.append(str(Path(__file__).resolve().parents[1]))  # foundry from a source tree, if not installed

from foundry.evaluate.degeneracy import declared_degenerate_ok  # noqa: E402
from foundry.evaluate.trial_inputs import make_trial_inputs, tensor_bytes  # noqa: E402
from foundry.tasks.degeneracy import check_task  # noqa: E402
from foundry.tasks.inputs import InputSpec, make_init_inputs, seed_everything  # noqa: E402
from foundry.tasks.loader import TaskError, build_module  # noqa: E402
from foundry.tasks.suite import load_suite  # noqa: E402
from foundry.types import Task  # noqa: E402

TIMING_SEED = 0


@dataclass(frozen=True)
class Row:
    """One task's line: verdict is "ok", "degenerate", "declared ok" (flagged, but the task
    file declares DEGENERATE_OK), "error", "skipped" (--max-gb) or "-" (not checked)."""

    task_id: str
    verdict: str
    forward_ms: float | None = None
    shape: str = ""
    check_s: float = 0.0
    peak_gb: float | None = None
    reason: str = ""
    details: dict = field(default_factory=dict)
    differential: tuple[int, ...] = ()  # inputs the judge checks differentially

    @property
    def differential_text(self) -> str:
        """e.g. "1 (0.507x)": each differential input with its swap's error / tolerance."""
        swaps = self.details.get("swaps", {})
        return ", ".join(f"{i} ({swaps.get(str(i), '?')}x)" for i in self.differential) or "-"

    @property
    def listed(self) -> bool:
        """Written to --out: flagged, failing, or with differential inputs."""
        return self.verdict in ("degenerate", "declared ok", "error") or bool(self.differential)

    @property
    def best(self) -> str:
        name, excess = self.details.get("best_answer"), self.details.get("best_excess")
        if name is None:
            return "-"
        return f"{name} {excess}x" if excess != "inf" else f"{name}: exact values or NaN/Inf differ"

    @property
    def counts_as_bad(self) -> bool:
        return self.verdict in ("degenerate", "error")


def time_reference(task: Task, device: str) -> tuple[float, str]:
    """Seconds for one forward (after one untimed warm-up call) on inputs generated on
    `device` (as the judge builds them), and the output's shape."""
    module = build_module(task)
    init = make_init_inputs(module, TIMING_SEED)
    seed_everything(TIMING_SEED)
    model = module.Model(*init).eval().to(device)
    inputs = make_trial_inputs(module, InputSpec(TIMING_SEED), device)
    cuda = torch.device(device).type == "cuda"
    with torch.no_grad(), torch.device(device):
        model(*inputs)  # warm-up
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = model(*inputs)
        if cuda:
            torch.cuda.synchronize()
        seconds = time.perf_counter() - t0
    shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
    return seconds, str(shape)


def estimate_gb(task: Task) -> float | None:
    """GB of one input set plus its output, from a run on the meta device (no memory, no
    compute); None where the task cannot run there."""
    try:
        module = build_module(task)
        seed_everything(TIMING_SEED)
        with torch.device("meta"):
            inputs = list(module.get_inputs())
            size = tensor_bytes(inputs)
            try:
                with torch.no_grad():
                    size += tensor_bytes(module.Model(*module.get_init_inputs())(*inputs))
            except Exception:  # noqa: BLE001 - some forwards need real values: inputs alone
                pass
        return size / 2**30
    except Exception:  # noqa: BLE001 - unknown: the task is not skipped
        return None


def free_device_memory(device: str) -> None:
    gc.collect()
    if torch.device(device).type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def peak_gb(device: str) -> float | None:
    if torch.device(device).type != "cuda":
        return None
    return torch.cuda.max_memory_allocated() / 2**30


def check_one(task: Task, args: argparse.Namespace) -> Row:
    """Time and check one task; every failure becomes an "error" row."""
    if args.max_gb is not None:
        gb = estimate_gb(task)
        if gb is not None and gb > args.max_gb:
            return Row(task.task_id, "skipped", reason=f"one input set and its output take {gb:.2f} GB "
                                                       f"(--max-gb {args.max_gb:g})")
    free_device_memory(args.device)
    try:
        fwd_s, shape = time_reference(task, args.device)
    except Exception as e:  # noqa: BLE001 - reported per task
        return Row(task.task_id, "error", reason=f"forward failed: {type(e).__name__}: {str(e)[:400]}",
                   peak_gb=peak_gb(args.device))
    finally:
        free_device_memory(args.device)
    if args.no_degeneracy:
        return Row(task.task_id, "-", fwd_s * 1e3, shape)
    t0 = time.perf_counter()
    try:
        report = check_task(task, trials=args.trials, device=args.device, atol=args.atol, rtol=args.rtol)
    except Exception as e:  # noqa: BLE001 - DegeneracyCheckError (out of memory) or a bug: reported per task
        return Row(task.task_id, "error", fwd_s * 1e3, shape, time.perf_counter() - t0, peak_gb(args.device),
                   f"check failed: {type(e).__name__}: {str(e)[:400]}")
    verdict = "ok"
    reason = report.reason if report.degenerate else report.differential_reason
    if report.degenerate:
        declared = declared_degenerate_ok(task)
        verdict = "declared ok" if declared else "degenerate"
        if declared:
            reason += f" (the task file declares DEGENERATE_OK: {declared})"
    return Row(task.task_id, verdict, fwd_s * 1e3, shape, time.perf_counter() - t0, peak_gb(args.device),
               reason, report.details, tuple(report.differential_inputs))


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def figures(details: dict) -> str:
    """The measured figures of a row, compact: each answer's and swap's error / tolerance."""
    keep = {k: details[k] for k in ("answers", "swaps", "differential_inputs", "non_finite", "error")
            if k in details}
    return json.dumps(keep, separators=(",", ":"))


def write_report(path: Path, rows: list[Row], header: str, summary: str) -> None:
    flagged = [r for r in rows if r.listed]
    tmp = path.with_name(path.name + ".tmp")
    if path.suffix.lower() == ".csv":
        with tmp.open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["task", "verdict", "best_answer_x_tolerance", "differential_inputs", "check_s", "peak_gb",
                        "reason", "figures"])
            for r in flagged:
                w.writerow([r.task_id, r.verdict, r.best, "" if not r.differential else r.differential_text,
                            f"{r.check_s:.2f}", "" if r.peak_gb is None else f"{r.peak_gb:.2f}", r.reason,
                            figures(r.details)])
    else:
        lines = [f"# Degeneracy check: flagged and failing tasks, and inputs checked differentially\n\n{header}\n",
                 "| task | verdict | best input-independent answer (error / tolerance) | differential inputs "
                 "(swap error / tolerance) | reason | figures |",
                 "| --- | --- | --- | --- | --- | --- |"]
        lines += [f"| {r.task_id} | {r.verdict} | {r.best} | {r.differential_text} | {_cell(r.reason)} | "
                  f"`{figures(r.details)}` |" for r in flagged]
        if not flagged:
            lines.append("| (none) | | | | | |")
        lines.append(f"\n{summary}\n")
        tmp.write_text("\n".join(lines))
    tmp.replace(path)


def summarise(rows: list[Row], tasks: list[Task], wall_s: float, done: bool) -> str:
    counts = {v: sum(r.verdict == v for r in rows)
              for v in ("ok", "degenerate", "declared ok", "error", "skipped", "-")}
    differential = sum(bool(r.differential) for r in rows)
    levels = sorted({t.level for t in tasks})
    per_level = ", ".join(f"level {lv}: {sum(t.level == lv for t in tasks)}" for lv in levels)
    fwd = sum(r.forward_ms or 0.0 for r in rows) / 1e3
    check = sum(r.check_s for r in rows)
    state = "" if done else f" (in progress: {len(rows)} of {len(tasks)} done)"
    return (f"{len(tasks)} tasks ({per_level}){state}; {counts['ok']} not degenerate, {counts['degenerate']} "
            f"degenerate, {counts['declared ok']} flagged but declared DEGENERATE_OK, {counts['error']} failed"
            + (f", {differential} with inputs the judge checks differentially" if differential else "")
            + (f", {counts['skipped']} skipped (--max-gb)" if counts["skipped"] else "")
            + (f", {counts['-']} not checked" if counts["-"] else "")
            + f"; reference forwards {fwd:.2f} s, degeneracy checks {check:.1f} s, wall {wall_s:.1f} s; "
              f"torch {torch.__version__}, {torch.get_num_threads()} threads")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--path", help="suite / KernelBench checkout / task folder (default: the project's suite)")
    ap.add_argument("--level", type=int, nargs="+", help="level folders to check (default: all)")
    ap.add_argument("--ids", type=int, nargs="+", help="task numbers (file prefixes) within one level")
    ap.add_argument("--limit", type=int, help="only the first N tasks")
    ap.add_argument("--profile", default="small", choices=("small", "full", "auto"),
                    help="size profile: small (SMALL_SIZES), full (published sizes), auto")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--trials", type=int, default=3, help="input sets for the degeneracy check (>= 3)")
    ap.add_argument("--atol", type=float, help="absolute tolerance (default: the task's, else per dtype)")
    ap.add_argument("--rtol", type=float, help="relative tolerance (default: the task's, else per dtype)")
    ap.add_argument("--max-gb", type=float, help="skip tasks whose input set and output exceed this many GB")
    ap.add_argument("--no-degeneracy", action="store_true", help="only time the reference forwards")
    ap.add_argument("--out", type=Path, help="write flagged and failing tasks, and those with differential inputs, here (.md or .csv)")
    args = ap.parse_args(argv)
    if args.trials < 3:
        ap.error(f"--trials must be at least 3, got {args.trials}")
    try:
        tasks = load_suite(path=args.path, level=args.level, ids=args.ids, profile=args.profile, limit=args.limit)
    except TaskError as e:
        ap.error(str(e))
    header = (f"`check_suite.py --path {args.path or 'benchmarks/suite'} --profile {args.profile} --device "
              f"{args.device}`" + (f" levels {args.level}" if args.level else "")
              + (f" ids {args.ids}" if args.ids else "") + f"; torch {torch.__version__}")
    print("| # | task | forward ms | output | verdict | best answer (x tol) | differential inputs (x tol) | check s "
          "| peak GB | reason |\n|" + " --- |" * 10, flush=True)
    rows: list[Row] = []
    t_start = time.perf_counter()
    for n, task in enumerate(tasks, 1):
        row = check_one(task, args)
        rows.append(row)
        fwd = "-" if row.forward_ms is None else f"{row.forward_ms:.2f}"
        peak = "-" if row.peak_gb is None else f"{row.peak_gb:.1f}"
        print(f"| {n}/{len(tasks)} | {task.task_id} | {fwd} | {row.shape or '-'} | {row.verdict} | {row.best} | "
              f"{row.differential_text} | {row.check_s:.1f} | {peak} | {_cell(row.reason)} |", flush=True)
        if args.out:
            write_report(args.out, rows, header, summarise(rows, tasks, time.perf_counter() - t_start, False))
    summary = summarise(rows, tasks, time.perf_counter() - t_start, True)
    if args.out:
        write_report(args.out, rows, header, summary)
    print(f"\n{summary}", flush=True)
    return 1 if any(r.counts_as_bad for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
