"""The run-wide panels of the page: how the run stands, judged candidates per minute, the
judge's phases, the evaluators by node and GPU, LLM spend, and the prompt strategies'
success across islands.

Read through the store (`RunDir.read_meta`, `RunDir.read_llm_calls`, `store.phases`) and,
for the prompt population, `PromptPopulation.from_state` over `checkpoints/prompts.json`.
`evaluators.json` (a list of what each evaluator said about itself, written by the
driver) has no reader in the store; `read_evaluator_infos` is the one here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from foundry.store import RunDir
from foundry.store.evallog import EvaluationRecord
from foundry.store.phases import PhaseSums, judged_per_minute

EVALUATORS_FILE = "evaluators.json"
PROMPTS_FILE = Path("checkpoints") / "prompts.json"


def watched_files(run_dir: Path) -> list[Path]:
    """The files besides the evaluation log whose change changes the panels."""
    return [run_dir / "run.json", run_dir / EVALUATORS_FILE, run_dir / "llm_calls.jsonl", run_dir / PROMPTS_FILE]


@dataclass(frozen=True)
class RunPanels:
    status: dict  # backend, profile, gpus, stop reason, sessions, first/last recorded time
    judged_per_min: float | None
    phases: dict  # seconds per phase (longest first), evaluations that carried them
    evaluators: tuple  # one dict per evaluator: host, GPUs, lanes, evaluated (logged), busy
    llm: dict  # calls, tokens and cost, in all and per model
    strategies: tuple  # per strategy: evaluated, correct and improved per island and in all
    prompts: tuple  # the prompt population's records (when the run kept one)


def read_evaluator_infos(run_dir: Path) -> list[dict[str, Any]]:
    """evaluators.json's entries ([] when missing or unreadable)."""
    try:
        data = json.loads((run_dir / EVALUATORS_FILE).read_text())
    except (OSError, ValueError):
        return []
    return [d for d in data if isinstance(d, dict)] if isinstance(data, list) else []


def _status(meta: Mapping[str, Any], records: list[EvaluationRecord]) -> dict:
    times = [r.recorded_at for r in records if r.recorded_at]
    sessions = meta.get("sessions") or []
    live = bool(sessions) and "ended" not in sessions[-1]
    return {"backend": meta.get("backend"), "profile": meta.get("profile"), "gpus": meta.get("gpus"),
            "stop_reason": meta.get("stop_reason"), "sessions": len(sessions), "running": live,
            "first_t": min(times) if times else None, "last_t": max(times) if times else None,
            "hardware": sorted({r.result.hardware for r in records if r.result.hardware})}


def _phases(records: list[EvaluationRecord]) -> dict:
    sums = PhaseSums.of((r.candidate.task_id, r.result) for r in records)
    return {"evaluations": sums.evaluations, "total_s": sums.seconds,
            "top": [[name, secs] for name, secs in sums.top(len(sums.total_s))]}


def _evaluators(infos: list[dict[str, Any]], records: list[EvaluationRecord]) -> tuple:
    logged: dict[str, int] = {}
    for r in records:
        logged[r.evaluator] = logged.get(r.evaluator, 0) + 1
    rows = []
    for info in infos:
        name = str(info.get("name") or "")
        rows.append({"name": name, "host": str(info.get("host") or "—"),
                     "gpus": ", ".join(str(g) for g in info.get("gpu_ids") or ()) or "none (CPU)",
                     "lanes": info.get("lanes"), "logged": logged.pop(name, 0),
                     "busy_s": info.get("busy_s"), "started": info.get("started", True)})
    for name, n in sorted(logged.items()):  # in the log but not (yet) in evaluators.json
        rows.append({"name": name or "—", "host": "—", "gpus": "—", "lanes": None, "logged": n,
                     "busy_s": None, "started": None})
    return tuple(sorted(rows, key=lambda r: (r["host"], r["gpus"], r["name"])))


def _llm(calls: list[dict[str, Any]]) -> dict:
    by_model: dict[str, dict[str, Any]] = {}
    for c in calls:
        m = by_model.setdefault(str(c.get("model") or "—"), {"calls": 0, "ok": 0, "prompt_tokens": 0,
                                                              "completion_tokens": 0, "cost_usd": 0.0})
        m["calls"] += 1
        m["ok"] += c.get("outcome") == "ok"
        m["prompt_tokens"] += int(c.get("prompt_tokens") or 0)
        m["completion_tokens"] += int(c.get("completion_tokens") or 0)
        m["cost_usd"] += float(c.get("cost_usd") or 0.0)
    return {"calls": len(calls), "cost_usd": sum(m["cost_usd"] for m in by_model.values()),
            "models": [{"model": k, **v} for k, v in sorted(by_model.items())]}


def _strategies(records: list[EvaluationRecord]) -> tuple:
    """Per strategy (prompt id, template, or origin) and island: evaluated, correct, and
    improved (a correct kernel faster than every earlier correct one of its task)."""
    best: dict[str, float] = {}
    table: dict[str, dict[int, list[int]]] = {}
    for r in records:
        key = r.candidate.strategy_id or r.candidate.origin
        cell = table.setdefault(key, {}).setdefault(r.candidate.island_id, [0, 0, 0])
        cell[0] += 1
        if r.result.correct:
            cell[1] += 1
            speed = r.result.speedup_eager
            if speed is not None and speed > best.get(r.candidate.task_id, float("-inf")):
                best[r.candidate.task_id] = speed
                cell[2] += 1
    out = []
    for key, islands in sorted(table.items()):
        total = [sum(v[i] for v in islands.values()) for i in range(3)]
        out.append({"strategy": key, "evaluated": total[0], "correct": total[1], "improved": total[2],
                    "islands": {str(i): {"evaluated": v[0], "correct": v[1], "improved": v[2]}
                                for i, v in sorted(islands.items())}})
    return tuple(out)


def _prompts(run_dir: Path) -> tuple:
    path = run_dir / PROMPTS_FILE
    if not path.is_file():
        return ()
    try:
        from foundry.llm.prompt_evolution import PromptPopulation
        population = PromptPopulation.from_state(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return ()
    return tuple({"prompt_id": s.prompt_id, "name": s.name, "origin": s.origin, "active": s.active,
                  "selected": s.selected, "reports": s.reports, "improved": s.improved, "correct": s.correct,
                  "mean_reward": s.mean_reward, "islands": s.islands} for s in population.stats())


def run_panels(run: RunDir, records: Iterable[EvaluationRecord], *, meta: Mapping[str, Any],
               calls: list[dict[str, Any]]) -> RunPanels:
    records = list(records)
    times: dict[str, list[float]] = {}
    for r in records:
        if r.recorded_at:
            times.setdefault(r.session, []).append(r.recorded_at)
    return RunPanels(status=_status(meta, records), judged_per_min=judged_per_minute(times),
                     phases=_phases(records), evaluators=_evaluators(read_evaluator_infos(run.path), records),
                     llm=_llm(calls), strategies=_strategies(records), prompts=_prompts(run.path))
