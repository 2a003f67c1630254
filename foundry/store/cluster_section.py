"""The report's "Cluster" section, from run.json alone: per driver session, the nodes,
which evaluator ran on which node (and GPU, from evaluators.json), nodes lost or added
during the run and what that cost, and migrations between islands on different nodes.
Empty for a run on one node with nothing lost."""

from __future__ import annotations

import json
from pathlib import Path


def _evaluator_rows(run_path: Path) -> list[dict]:
    try:
        rows = json.loads((run_path / "evaluators.json").read_text())
    except (OSError, ValueError):
        return []
    return [r for r in rows if isinstance(r, dict)]


def cluster_section(meta: dict, run_path: Path) -> list[str]:
    sessions = [s for s in meta.get("sessions", []) if isinstance(s, dict) and s.get("cluster")]
    if not sessions:
        return []
    last = sessions[-1]["cluster"]
    several = len(last.get("nodes") or []) > 1
    if not several and not any(s["cluster"].get("events") for s in sessions):
        return []
    lines = ["## Cluster", ""]
    for k, session in enumerate(sessions):
        c = session["cluster"]
        nodes = c.get("nodes") or []
        lines.append(f"Session {k + 1}: {len(nodes)} node(s), the driver on {c.get('driver_node')}.")
        for e in c.get("events") or []:
            label = (e.get("node") or {}).get("label", "?")
            if e.get("event") == "lost":
                lines.append(f"- node {label} lost {e.get('at_s')} s into the run: evaluator(s) "
                             f"{', '.join(e.get('evaluators') or []) or 'none'} gone, {e.get('requeued', 0)} "
                             f"candidate(s) they were evaluating sent back to the queue, island(s) "
                             f"{', '.join(map(str, e.get('islands') or [])) or 'none'} restarted on another node")
            else:
                lines.append(f"- node {label} joined {e.get('at_s')} s into the run: evaluator(s) "
                             f"{', '.join(e.get('evaluators') or []) or 'none'} started there")
        across = [m for m in c.get("migrations") or [] if any(a != b for a, b in m.get("node_pairs") or [])]
        if across:
            elites = sum(int(m.get("elites") or 0) for m in across)
            lines.append(f"- migrations between islands on different nodes: {len(across)} island pair(s), "
                         f"{elites} elite(s) sent")
        lines.append("")
    rows = _evaluator_rows(run_path)
    if rows:
        lines += ["| evaluator | node | GPU | evaluated | state |", "|---|---|---|---|---|"]
        for r in rows:
            gpus = ", ".join(r.get("gpu_ids") or []) or "—"
            lines.append(f"| {r.get('name')} | {r.get('node', r.get('node_id', '—'))} | {gpus} | "
                         f"{r.get('evaluated', '—')} | {r.get('lost', 'running to the end')} |")
        lines.append("")
    return lines
