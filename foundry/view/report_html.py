"""`report.html`: the page written once, with everything it shows inside it (the update a
live page would fetch first, and the panel of every kernel the page links to: archive
cells, lineage steps, the latest evaluations, and each one's parent), for a browser with
no server. Other evaluations' panels stay out, so the file grows with the archives rather
than with the log (the live page serves every one)."""

from __future__ import annotations

import time
from pathlib import Path

from foundry.view.kernel import detail_json
from foundry.view.model import build_snapshot
from foundry.view.page import page_html

REPORT_HTML = "report.html"


def static_data(run_dir: str | Path) -> dict:
    """The page's data for `run_dir`: the whole update, the kernel panels the page links
    to, and each of their candidates' highlighted source once (panels of one candidate
    share it)."""
    snap = build_snapshot(run_dir)
    details, sources = {}, {}
    linked = snap.linked_eval_ids()
    for record in (r for r in snap.records if r.eval_id in linked):
        detail = detail_json(record, snap.by_candidate)
        sources.setdefault(record.candidate.candidate_id, detail["tokens"])
        detail["tokens"] = None
        details[record.eval_id] = detail
    return {"update": snap.update(0), "details": details, "sources": sources}


def write_report_html(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Write the page for `run_dir` to `out` (default RUN_DIR/report.html), atomically."""
    run_dir = Path(run_dir).resolve()
    path = Path(out) if out is not None else run_dir / REPORT_HTML
    written = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    text = page_html(title=f"KernelFoundry: {run_dir.name}", config={"mode": "static", "written": written},
                     data=static_data(run_dir))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name("." + path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path
