"""The evaluation log: every evaluation of a run, as Parquet parts of one fixed schema.

Writing: `EvaluationLog.append` first writes the row as one JSON line to this session's
journal (so a driver killed with SIGKILL loses nothing it had recorded), buffers it, and
every `flush_rows` rows or `flush_s` seconds writes the buffer as a new Parquet part,
atomically (temporary file, then rename), and empties the journal. Opening a log folds
any journal a killed session left behind into a part.

Reading: `read_evaluations(run_dir)` returns every evaluation in the parts and journals,
each once (by `eval_id`), in recording order.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import pyarrow.parquet as pq

from foundry.store.schema import CANDIDATE_COLUMNS, EVAL_SCHEMA, RESULT_COLUMNS, conform, to_table
from foundry.types import Candidate, EvalResult

EVAL_DIR = "evaluations"


@dataclass(frozen=True)
class EvaluationRecord:
    """One logged evaluation: the candidate, its result and where/when it was recorded."""

    candidate: Candidate
    result: EvalResult
    eval_id: str
    seq: int
    session: str = ""
    recorded_at: float = 0.0
    evaluator: str = ""

    def to_row(self) -> dict[str, Any]:
        row = {**self.candidate.to_row(), **self.result.to_row()}
        row.update(eval_id=self.eval_id, seq=self.seq, session=self.session,
                   recorded_at=self.recorded_at, evaluator=self.evaluator)
        return conform(row)

    @staticmethod
    def from_row(row: dict[str, Any]) -> "EvaluationRecord":
        cand = Candidate.from_row({k: row[k] for k in CANDIDATE_COLUMNS if row.get(k) is not None})
        res = EvalResult.from_row({k: row[k] for k in RESULT_COLUMNS if row.get(k) is not None})
        return EvaluationRecord(candidate=cand, result=res, eval_id=str(row["eval_id"]),
                                seq=int(row["seq"]), session=row.get("session") or "",
                                recorded_at=float(row.get("recorded_at") or 0.0),
                                evaluator=row.get("evaluator") or "")


def _read_journal(path: Path) -> list[dict[str, Any]]:
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:  # a line cut short by a kill: it was never complete
                continue
    return rows


def _read_rows(eval_dir: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    if not eval_dir.is_dir():
        return rows
    for part in sorted(eval_dir.glob("part-*.parquet")):
        rows.extend(pq.read_table(part, schema=EVAL_SCHEMA).to_pylist())
    for journal in sorted(eval_dir.glob("journal-*.jsonl")):
        rows.extend(_read_journal(journal))
    seen: set[str] = set()
    unique = []
    for r in sorted(rows, key=lambda r: (r["seq"], r["eval_id"])):
        if r["eval_id"] not in seen:
            seen.add(r["eval_id"])
            unique.append(r)
    return unique


def read_evaluations(run_dir: str | Path) -> list[EvaluationRecord]:
    """Every evaluation recorded in `run_dir` (parts and journals), once each, by seq."""
    return [EvaluationRecord.from_row(r) for r in _read_rows(Path(run_dir) / EVAL_DIR)]


def _write_part(path: Path, rows: list[dict[str, Any]]) -> None:
    tmp = path.with_name("." + path.name + ".tmp")
    pq.write_table(to_table(rows), tmp)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)


class EvaluationLog:
    """Append-only writer of a run's evaluations (one per driver session)."""

    def __init__(self, run_dir: str | Path, *, session: str | None = None,
                 flush_rows: int = 256, flush_s: float = 5.0):
        self.dir = Path(run_dir) / EVAL_DIR
        self.dir.mkdir(parents=True, exist_ok=True)
        self.session = session or time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
        self.flush_rows, self.flush_s = int(flush_rows), float(flush_s)
        existing = _read_rows(self.dir)
        self._fold_old_journals()
        self.next_seq = (max(r["seq"] for r in existing) + 1) if existing else 0
        self._buffer: list[dict[str, Any]] = []
        self._parts = 0
        self._last_flush = time.monotonic()
        self._journal_path = self.dir / f"journal-{self.session}.jsonl"
        self._journal = open(self._journal_path, "a", encoding="utf-8")

    def _fold_old_journals(self) -> None:
        for journal in sorted(self.dir.glob("journal-*.jsonl")):
            rows = _read_journal(journal)
            if rows:
                _write_part(self.dir / f"part-{journal.stem[len('journal-'):]}-recovered.parquet", rows)
            journal.unlink()

    def append(self, candidate: Candidate, result: EvalResult, *, evaluator: str = "") -> EvaluationRecord:
        rec = EvaluationRecord(candidate=candidate, result=result,
                               eval_id=f"{self.session}-{self.next_seq}", seq=self.next_seq,
                               session=self.session, recorded_at=time.time(), evaluator=evaluator)
        self.next_seq += 1
        row = rec.to_row()
        self._journal.write(json.dumps(row) + "\n")
        self._journal.flush()
        self._buffer.append(row)
        if len(self._buffer) >= self.flush_rows or time.monotonic() - self._last_flush >= self.flush_s:
            self.flush()
        return rec

    def extend(self, pairs: Iterable[tuple[Candidate, EvalResult, str]]) -> list[EvaluationRecord]:
        return [self.append(c, r, evaluator=e) for c, r, e in pairs]

    def flush(self) -> None:
        """Write the buffered rows as one Parquet part (atomically) and empty the journal."""
        self._last_flush = time.monotonic()
        if not self._buffer:
            return
        self._parts += 1
        _write_part(self.dir / f"part-{self.session}-{self._parts:05d}.parquet", self._buffer)
        self._buffer = []
        self._journal.truncate(0)
        self._journal.seek(0)

    def close(self) -> None:
        if self._journal.closed:
            return
        self.flush()
        self._journal.close()
        self._journal_path.unlink(missing_ok=True)
