"""report.md: a table per task (best speedup vs eager and torch.compile, correctness,
evaluations, cost), where the judge's time went (seconds per phase, judged candidates
per minute), what was unfinished when the run stopped, and the plots; rebuilt from the
run directory alone."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from foundry.hardware import baseline_line
from foundry.store.best import write_best
from foundry.store.evallog import EvaluationRecord, read_evaluations
from foundry.store.phases import PhaseSums, judged_per_minute
from foundry.store.plots import plot_archive, plot_progress, plot_roofline
from foundry.store.rundir import RunDir, task_file_name, write_atomic
from foundry.store.summary import TaskSummary, best_record, geometric_means, summarize
from foundry.store.cluster_section import cluster_section
from foundry.store.unfinished import Unfinished, read_unfinished
from foundry.types import Stage

TOP_PHASES = 8  # phases listed by name in "Where the judge's time went"; the rest are summed


def _x(v: float | None) -> str:
    return "—" if v is None else f"{v:.2f}x"


def _ms(v: float | None) -> str:
    return "—" if v is None else f"{v:.4g} ms"


def _cell(text: str) -> str:
    """`text` inside a table cell's code span: no backquote, no bare column bar."""
    return text.replace("`", "'").replace("|", "\\|")


def _task_section(s: TaskSummary, run: RunDir, heatmap: Path | None) -> list[str]:
    lines = [f"### {s.task_id}", "", "| metric | value |", "|---|---|",
             f"| best speedup vs eager | {_x(s.best_speedup_eager)} |",
             f"| best speedup vs torch.compile | {_x(s.best_speedup_compile)} |",
             f"| best runtime | {_ms(s.best_runtime_ms)} |",
             f"| eager / torch.compile | {_ms(s.eager_ms)} / {_ms(s.compile_ms)} |",
             *([f"| why a baseline is missing | `{_cell(s.baseline_error)}` |"] if s.baseline_error else []),
             f"| evaluations | {s.evaluations} |",
             f"| correct | {s.correct} ({s.share_correct:.0%}) |",
             f"| LLM cost | ${s.llm_cost_usd:.4f} |",
             f"| backends | {', '.join(s.backends) or '—'} |",
             "| stages reached | " + (", ".join(f"{Stage(k).label} {v}" for k, v in sorted(s.stages.items())) or "—") + " |"]
    if s.best_roofline:
        lines.append(f"| best against the roofline floor | {s.best_roofline.get('fraction', 0):.0%} of the floor "
                     f"({_ms(s.best_roofline.get('floor_ms'))}) |")
        lines.append(f"| bottleneck of the best kernel | {s.best_roofline.get('diagnosis', '—')} |")
        for which, label in (("eager", "eager"), ("compile", "torch.compile")):
            line = baseline_line((s.baseline_kernels or {}).get(which),
                                 fraction=s.best_roofline.get(f"{which}_fraction"))
            if line:
                lines.append(f"| {label} against the floor | {line} |")
    if s.best_hardware:
        source = "Nsight Compute" if s.best_hardware.get("source") == "ncu" else "the judge's profiler (no counters)"
        lines.append(f"| hardware of the best kernel ({source}) | {s.best_hardware.get('diagnosis') or '—'} |")
    if s.best_candidate_id:
        rel = run.best_file(s.task_id).relative_to(run.path)
        lines.append(f"| best kernel | [{rel}]({rel}) (candidate {s.best_candidate_id}) |")
    else:
        lines.append("| best kernel | no correct kernel found |")
        if s.failures:
            why = "; ".join(f"`{_cell(line)}`" for line in s.failures)
            lines.append(f"| why its evaluations failed (most frequent first) | {why} |")
    if heatmap is not None:
        lines += ["", f"![archive of {s.task_id}]({heatmap.relative_to(run.path)})"]
    return lines + [""]


def _s(v: float) -> str:
    return f"{v:.1f} s" if v >= 10 else f"{v:.3g} s"


def time_section(records: list[EvaluationRecord]) -> list[str]:
    """Seconds per judge phase over the evaluations that carried them (longest first, the
    tail summed as "other"), and judged candidates per minute in steady state."""
    sums = PhaseSums.of((r.candidate.task_id, r.result) for r in records)
    times: dict[str, list[float]] = {}
    for r in records:
        if r.recorded_at:
            times.setdefault(r.session, []).append(r.recorded_at)
    rate = judged_per_minute(times)
    lines = ["## Where the judge's time went", "",
             "Judged candidates per minute: " + ("—" if rate is None else f"{rate:.2f}")
             + " (steady state: from the first to the last evaluation of each driver session).", ""]
    if not sums.evaluations:
        return lines + ["No evaluation recorded a per-phase breakdown.", ""]
    total = sums.seconds
    lines += [f"Phases of {sums.evaluations} of {len(records)} evaluations, {_s(total)} in all.", "",
              "| phase | time | share | per evaluation |", "|---|---|---|---|"]
    top = sums.top(TOP_PHASES)
    rest = [(n, v) for n, v in sums.top(len(sums.total_s)) if n not in dict(top)]
    if rest:
        top.append((f"other ({len(rest)} phases)", sum(v for _, v in rest)))
    for name, secs in top:
        share = secs / total if total > 0 else 0.0
        lines.append(f"| {name} | {_s(secs)} | {share:.0%} | {_s(secs / sums.evaluations)} |")
    setup = sums.first_time_setup()
    if setup:
        slowest = max(setup, key=lambda t: setup[t])
        lines += ["", f"First-time setup of a task (its fit check and reference ops, degeneracy check, eager and "
                      f"torch.compile baselines), {len(setup)} tasks: median {_s(statistics.median(setup.values()))}, "
                      f"longest {_s(setup[slowest])} ({slowest})."]
    return lines + [""]


def unfinished_section(unfinished: list[Unfinished]) -> list[str]:
    if not unfinished:
        return []
    lines = ["## Unfinished when the run stopped", "",
             f"{len(unfinished)} candidate(s) were still queued or being evaluated when the run stopped "
             "waiting; they are not counted as evaluated, and a resumed run evaluates them again.", "",
             "| task | candidate | island | evaluator | had run |", "|---|---|---|---|---|"]
    for u in unfinished:
        ran = "queued" if u.running_s is None else _s(u.running_s)
        lines.append(f"| {u.candidate.task_id} | {u.candidate.candidate_id} | {u.candidate.island_id} | "
                     f"{u.evaluator or '—'} | {ran} |")
    return lines + [""]


def model_shares(run: RunDir) -> dict[str, float]:
    """Task id -> share of the model's measured forward time, when the run's tasks folder
    (`tasks.path` of its config.yaml) was written by foundry.extract (holds manifest.json);
    else empty."""
    try:
        from omegaconf import OmegaConf
        path = OmegaConf.load(run.config).get("tasks", {}).get("path")
        manifest = Path(str(path)).expanduser() / "manifest.json" if path else None
        if manifest is not None and not manifest.is_absolute() and not manifest.is_file():
            manifest = run.path.parent / manifest
        regions = json.loads(manifest.read_text())["regions"] if manifest is not None else []
        return {str(r["task_id"]): float(r["share"]) for r in regions}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def build_report(run_dir: str | Path) -> Path:
    """Read everything evaluated in `run_dir`, rewrite best/*.py, the plots and report.md."""
    run = RunDir(run_dir)
    records = read_evaluations(run.path)
    meta = run.read_meta()
    costs: dict[str, float] = {}
    for call in run.read_llm_calls():
        t = str(call.get("task_id") or "")
        costs[t] = costs.get(t, 0.0) + float(call.get("cost_usd") or 0.0)
    summaries = summarize(records, task_ids=meta.get("tasks", ()), llm_cost_by_task=costs)
    shares = model_shares(run)
    if shares:  # tasks extracted from a model: the largest share of its time first
        summaries = dict(sorted(summaries.items(), key=lambda kv: -shares.get(kv[0], -1.0)))
    by_task: dict[str, list] = {}
    for r in records:
        by_task.setdefault(r.candidate.task_id, []).append(r)
    for recs in by_task.values():
        best = best_record(recs)
        if best is not None:
            write_best(run, best.candidate, best.result)
    progress = plot_progress(summaries, run.plots / "best_speedup.png")
    total_cost = sum(costs.values())
    lines = ["# KernelFoundry run report", "",
             f"Run directory: `{run.path.name}`; evaluations: {len(records)}; "
             f"tasks: {len(summaries)}; LLM cost: ${total_cost:.4f}; "
             f"hardware: {', '.join(sorted({r.result.hardware for r in records if r.result.hardware})) or '—'}.",
             ""]
    if meta.get("stop_reason"):
        lines += [f"Stopped: {meta['stop_reason']}.", ""]
    lines += ["## Summary", ""]
    if shares:
        lines += ["Tasks extracted from a model, by their share of its measured forward time (manifest.json).", ""]
    lines += ["| task | best vs eager | best vs torch.compile | won by | correct | evaluations | LLM cost |",
              "|---|---|---|---|---|---|---|"]
    for s in summaries.values():
        share = f" ({shares[s.task_id]:.0%} of the model)" if s.task_id in shares else ""
        lines.append(f"| {s.task_id}{share} | {_x(s.best_speedup_eager)} | {_x(s.best_speedup_compile)} | "
                     f"{s.best_strategy or '—'} | {s.correct}/{s.evaluations} ({s.share_correct:.0%}) | "
                     f"{s.evaluations} | ${s.llm_cost_usd:.4f} |")
    means = geometric_means(summaries.values())
    lines += ["", f"Geometric mean over the tasks (a task without a correct kernel counted at eager's time): "
                  f"{_x(means['vs_eager'])} vs eager ({means['vs_eager_tasks']} tasks), "
                  f"{_x(means['vs_compile'])} vs torch.compile ({means['vs_compile_tasks']} tasks).", ""]
    if progress is not None:
        lines += [f"![best speedup over evaluations]({progress.relative_to(run.path)})", ""]
    roof = plot_roofline(summaries, run.plots / "roofline.png")
    if roof is not None:
        lines += [f"![runtime against the roofline floor]({roof.relative_to(run.path)})", ""]
    lines += time_section(records)
    lines += unfinished_section(read_unfinished(run.path))
    lines += cluster_section(meta, run.path)
    lines += ["## Tasks", ""]
    for s in summaries.values():
        heat = plot_archive(s, run.plots / "archive" / (task_file_name(s.task_id) + ".png"))
        lines += _task_section(s, run, heat)
    write_atomic(run.report, "\n".join(lines))
    return run.report
