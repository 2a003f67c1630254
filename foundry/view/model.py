"""What the run page shows, computed from a run directory through the store's readers.

`RunReader.snapshot()` reads the evaluation log (`read_evaluations`), `run.json` and the
LLM call log, and derives per task the summary (`store.summary.summarize`), the best
speedups so far after each evaluation, each island's archive cells and the lineage of
the best kernel. The snapshot is rebuilt only when a file under the run directory that it
reads has changed, so polling an idle run costs a directory listing.

`Snapshot.update(since)` is what the page fetches: the evaluations after the first
`since` (the page sends how many it already has), the views of the tasks those touched,
and the run-wide panels (small, sent whole).
"""

from __future__ import annotations

import functools
import logging
import math
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from foundry.store import RunDir, read_evaluations
from foundry.store.evallog import EVAL_DIR, EvaluationRecord
from foundry.store.summary import TaskSummary, geometric_means, summarize
from foundry.types import Stage
from foundry.view.jsonsafe import dumps, finite
from foundry.view.panels import RunPanels, run_panels, watched_files
from islands.records import fitness_of

log = logging.getLogger("foundry.view")
RECENT = 20  # the latest evaluations the page lists
ROW_COLUMNS = ("eval_id", "seq", "task_id", "n", "t", "island", "strategy", "stage", "correct",
               "speedup_eager", "best_eager", "best_compile", "candidate_id")


def strategy_of(record: EvaluationRecord) -> str:
    """What made a candidate: its prompt or template strategy, else its origin."""
    return record.candidate.strategy_id or record.candidate.origin


@dataclass(frozen=True)
class ArchiveCell:
    """One filled cell of an island's archive, projected on (memory, compute): the
    highest-fitness evaluation the island logged there, over the parallelism axis."""

    memory: int
    compute: int
    parallelism: int
    fitness: float
    eval_id: str
    correct: bool
    speedup_eager: float | None


@dataclass(frozen=True)
class LineageStep:
    """One ancestor of a task's best kernel (the best kernel first, its seed last)."""

    eval_id: str
    candidate_id: str
    strategy: str
    origin: str
    island: int
    generation: int
    stage: str
    correct: bool
    speedup_eager: float | None
    other_parents: tuple  # parent ids beyond the first one followed


@dataclass(frozen=True)
class TaskView:
    task_id: str
    summary: dict  # TaskSummary's scalar figures
    best_eval_id: str | None
    archive: dict  # island id (str) -> list of ArchiveCell
    lineage: tuple  # LineageStep, best kernel first
    lineage_end: str  # why the lineage stops where it does


@dataclass(frozen=True)
class Snapshot:
    """A run directory as read once: its records in log order and the derived views."""

    name: str
    records: tuple
    rows: tuple  # one ROW_COLUMNS list per record
    tasks: dict  # task id -> TaskView
    task_order: tuple
    means: dict
    panels: RunPanels
    by_eval: dict  # eval id -> EvaluationRecord
    by_candidate: dict  # candidate id -> its highest-fitness EvaluationRecord

    def update(self, since: int = 0) -> dict[str, Any]:
        """The page's update: evaluations after the first `since`, the tasks they touched
        (every task when `since` is 0, or when it does not fit this log: `reset`)."""
        reset = not 0 < since <= len(self.records)
        start = 0 if reset else since
        fresh = self.records[start:]
        touched = self.task_order if reset else tuple(dict.fromkeys(r.candidate.task_id for r in fresh))
        return finite({"name": self.name, "recent": RECENT, "total": len(self.records), "since": start, "reset": reset,
                       "columns": ROW_COLUMNS, "rows": self.rows[start:],
                       "task_order": self.task_order,
                       "tasks": [asdict(self.tasks[t]) for t in touched if t in self.tasks],
                       "means": self.means, "run": asdict(self.panels)})

    @functools.cached_property
    def first_update_json(self) -> bytes:
        """`update(0)` as JSON, made once per snapshot (every page load asks for it)."""
        return dumps(self.update(0)).encode("utf-8")

    def linked_eval_ids(self) -> set[str]:
        """The evaluations the page links to (archive cells, lineage steps, the latest
        RECENT), and the first parent of each."""
        ids = {r[0] for r in self.rows[-RECENT:]}
        for view in self.tasks.values():
            ids.update(c.eval_id for cells in view.archive.values() for c in cells)
            ids.update(step.eval_id for step in view.lineage)
        parents = set()
        for eval_id in ids:
            record = self.by_eval[eval_id]
            parent = self.by_candidate.get(record.candidate.parent_ids[0]) if record.candidate.parent_ids else None
            if parent is not None:
                parents.add(parent.eval_id)
        return ids | parents


def _summary_figures(s: TaskSummary) -> dict:
    return {"evaluations": s.evaluations, "correct": s.correct, "best_speedup_eager": s.best_speedup_eager,
            "best_speedup_compile": s.best_speedup_compile, "best_runtime_ms": s.best_runtime_ms,
            "eager_ms": s.eager_ms, "compile_ms": s.compile_ms, "llm_cost_usd": s.llm_cost_usd,
            "backends": list(s.backends), "best_strategy": s.best_strategy,
            "stages": {Stage(k).label: v for k, v in sorted(s.stages.items())},
            "roofline": s.best_roofline, "hardware": s.best_hardware}


def _fitness(record: EvaluationRecord) -> float:
    try:
        return fitness_of(record.result)
    except ValueError:  # a non-finite speedup: ranked as the stage alone
        return float(min(record.result.stage, int(Stage.VALUE)))


def _archive(records: Iterable[EvaluationRecord]) -> dict[str, list[ArchiveCell]]:
    cells: dict[tuple[int, int, int], ArchiveCell] = {}
    for r in records:
        d = r.result.descriptor
        if len(d) < 2:
            continue
        key = (r.candidate.island_id, int(d[0]), int(d[1]))
        fit = _fitness(r)
        if key not in cells or fit > cells[key].fitness:  # first one wins ties, as in the archive
            cells[key] = ArchiveCell(memory=key[1], compute=key[2], parallelism=int(d[2]) if len(d) > 2 else 0,
                                     fitness=fit, eval_id=r.eval_id, correct=r.result.correct,
                                     speedup_eager=r.result.speedup_eager)
    out: dict[str, list[ArchiveCell]] = {}
    for (island, _, _), cell in sorted(cells.items()):
        out.setdefault(str(island), []).append(cell)
    return out


def _lineage(best: EvaluationRecord | None, by_candidate: Mapping[str, EvaluationRecord]) -> tuple[tuple, str]:
    steps: list[LineageStep] = []
    seen: set[str] = set()
    record = best
    while record is not None:
        c, res = record.candidate, record.result
        seen.add(c.candidate_id)
        steps.append(LineageStep(eval_id=record.eval_id, candidate_id=c.candidate_id, strategy=strategy_of(record),
                                 origin=c.origin, island=c.island_id, generation=c.generation,
                                 stage=Stage(int(res.stage)).label, correct=res.correct,
                                 speedup_eager=res.speedup_eager, other_parents=tuple(c.parent_ids[1:])))
        if not c.parent_ids:
            return tuple(steps), f"{c.candidate_id} has no parent ({c.origin})"
        parent = c.parent_ids[0]
        if parent in seen:
            return tuple(steps), f"parent {parent} is already in this lineage"
        record = by_candidate.get(parent)
        if record is None:
            return tuple(steps), f"parent {parent} is not in this run's evaluation log"
    return tuple(steps), "no correct kernel yet"


def _rows(records: tuple) -> tuple:
    rows = []
    count: dict[str, int] = {}
    best: dict[str, list] = {}
    for r in records:
        task, res = r.candidate.task_id, r.result
        count[task] = count.get(task, 0) + 1
        b = best.setdefault(task, [None, None])
        if res.correct:
            for i, v in enumerate((res.speedup_eager, res.speedup_compile)):
                if v is not None and math.isfinite(v):
                    b[i] = v if b[i] is None else max(b[i], v)
        rows.append([r.eval_id, r.seq, task, count[task], r.recorded_at or None, r.candidate.island_id,
                     strategy_of(r), Stage(int(res.stage)).label, res.correct, res.speedup_eager,
                     b[0], b[1], r.candidate.candidate_id])
    return tuple(rows)


def build_snapshot(run_dir: str | Path) -> Snapshot:
    """Read the run directory and derive everything the page shows."""
    run = RunDir(run_dir)
    records = tuple(read_evaluations(run.path))
    meta = run.read_meta()
    calls = run.read_llm_calls()
    costs: dict[str, float] = {}
    for call in calls:
        t = str(call.get("task_id") or "")
        costs[t] = costs.get(t, 0.0) + float(call.get("cost_usd") or 0.0)
    summaries = summarize(records, task_ids=meta.get("tasks", ()), llm_cost_by_task=costs)
    by_eval = {r.eval_id: r for r in records}
    by_candidate: dict[str, EvaluationRecord] = {}
    by_task: dict[str, list[EvaluationRecord]] = {t: [] for t in summaries}
    for r in records:
        held = by_candidate.get(r.candidate.candidate_id)
        if held is None or _fitness(r) > _fitness(held):
            by_candidate[r.candidate.candidate_id] = r
        by_task.setdefault(r.candidate.task_id, []).append(r)
    tasks = {}
    for task_id, s in summaries.items():
        best = by_candidate.get(s.best_candidate_id) if s.best_candidate_id else None
        lineage, end = _lineage(best, by_candidate)
        tasks[task_id] = TaskView(task_id=task_id, summary=_summary_figures(s),
                                  best_eval_id=best.eval_id if best else None,
                                  archive=_archive(by_task.get(task_id, ())), lineage=lineage, lineage_end=end)
    return Snapshot(name=run.path.name, records=records, rows=_rows(records), tasks=tasks,
                    task_order=tuple(summaries), means=geometric_means(summaries.values()),
                    panels=run_panels(run, records, meta=meta, calls=calls), by_eval=by_eval,
                    by_candidate=by_candidate)


class RunReader:
    """A run directory's snapshot, rebuilt when a file it reads has changed (thread-safe).

    `snapshot()` never waits for a rebuild once there is a snapshot: it hands back the
    last one and, when the run has changed, starts a rebuild in the background (so a page
    load is not held up by the log being read again); rebuilds start at most once per
    `gap_factor` times the last one's duration, so the server reads a large live log for
    at most about 1 / gap_factor of its time. `snapshot(fresh=True)` reads the run now.
    """

    def __init__(self, run_dir: str | Path, *, gap_factor: float = 3.0):
        self.path = Path(run_dir).resolve()
        self.gap_factor = float(gap_factor)
        self._lock = threading.Lock()  # guards the fields below
        self._build_lock = threading.Lock()  # one build at a time
        self._signature: tuple | None = None
        self._snapshot: Snapshot | None = None
        self._building = False
        self._last_start = float("-inf")
        self.last_build_s = 0.0

    def signature(self) -> tuple:
        """Name, size and modification time of every file the snapshot reads."""
        files = sorted((self.path / EVAL_DIR).glob("*")) if (self.path / EVAL_DIR).is_dir() else []
        out = []
        for f in [*files, *watched_files(self.path)]:
            try:
                st = f.stat()
            except OSError:
                continue
            out.append((f.name, st.st_size, st.st_mtime_ns))
        return tuple(out)

    def _build(self) -> Snapshot:
        with self._build_lock:
            sig = self.signature()  # taken first: a change during the build is seen next time
            started = time.monotonic()
            with self._lock:
                self._last_start = started
            snap = build_snapshot(self.path)
            snap.first_update_json  # made here, not by the first page load that asks for it
            with self._lock:
                self._snapshot, self._signature = snap, sig
                self.last_build_s = time.monotonic() - started
                self._building = False
            return snap

    def _build_in_background(self) -> None:
        try:
            self._build()
        except Exception:  # noqa: BLE001 - a torn read of a live run: the next poll tries again
            log.exception("reading %s failed; keeping the last snapshot", self.path)
            with self._lock:
                self._building = False

    def snapshot(self, *, fresh: bool = False) -> Snapshot:
        with self._lock:
            current = self._snapshot
        if fresh or current is None:
            return self._build()
        sig = self.signature()
        with self._lock:
            due = (sig != self._signature and not self._building
                   and time.monotonic() - self._last_start >= self.gap_factor * self.last_build_s)
            if due:
                self._building = True
        if due:
            threading.Thread(target=self._build_in_background, name="foundry-view-read", daemon=True).start()
        return current
