"""`unfinished.jsonl`: candidates whose evaluation had not ended when the run stopped.

The driver waits at most `run.stop_timeout_s` for evaluations in flight. What is still
queued or being evaluated then is not in the evaluation log (nothing reading the log
counts it as evaluated, so a resumed run does not treat it as done); it is written here
instead, one JSON line per candidate. The file is rewritten whole (atomically) at the
end of each driver session: a resumed run hands these candidates to their islands to
be evaluated first, and the file then keeps those still unfinished, plus the new ones.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from foundry.store.rundir import UNFINISHED_FILE, write_atomic
from foundry.types import Candidate


@dataclass(frozen=True)
class Unfinished:
    """One candidate the run stopped waiting for."""

    candidate: Candidate  # as its island submitted it (lineage, island, generation)
    evaluator: str = ""  # the evaluator that had it ("" while it was still queued)
    running_s: float | None = None  # how long its evaluation had run (None: still queued)
    reason: str = ""  # why the run stopped
    stopped_at: float = 0.0  # unix time the driver gave up on it

    @property
    def key(self) -> tuple[int, str]:
        return self.candidate.island_id, self.candidate.candidate_id

    def to_row(self) -> dict[str, Any]:
        return {"candidate": self.candidate.to_row(), "evaluator": self.evaluator,
                "running_s": self.running_s, "reason": self.reason, "stopped_at": self.stopped_at}

    @staticmethod
    def from_row(row: dict[str, Any]) -> "Unfinished":
        if not isinstance(row, dict) or not isinstance(row.get("candidate"), dict):
            raise ValueError(f"an unfinished record needs a 'candidate' mapping, got {row!r:.200}")
        running = row.get("running_s")
        return Unfinished(candidate=Candidate.from_row(row["candidate"]), evaluator=str(row.get("evaluator") or ""),
                          running_s=None if running is None else float(running),
                          reason=str(row.get("reason") or ""), stopped_at=float(row.get("stopped_at") or 0.0))

    def summary(self) -> dict[str, Any]:
        """The short form run.json keeps: which candidate, where, how long it had run."""
        return {"task_id": self.candidate.task_id, "candidate_id": self.candidate.candidate_id,
                "island_id": self.candidate.island_id, "evaluator": self.evaluator,
                "running_s": None if self.running_s is None else round(self.running_s, 3)}


def read_unfinished(run_dir: str | Path) -> list[Unfinished]:
    """The candidates recorded as unfinished in `run_dir` (none when there is no file;
    a line that does not parse is skipped)."""
    path = Path(run_dir) / UNFINISHED_FILE
    out: list[Unfinished] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return out
    for line in lines:
        try:
            out.append(Unfinished.from_row(json.loads(line)))
        except (ValueError, TypeError, KeyError):
            continue
    return out


def write_unfinished(run_dir: str | Path, records: Iterable[Unfinished]) -> None:
    """Replace the file with `records` (once per island and candidate); no records, no file."""
    path = Path(run_dir) / UNFINISHED_FILE
    unique: dict[tuple[int, str], Unfinished] = {}
    for r in records:
        unique.setdefault(r.key, r)
    if not unique:
        path.unlink(missing_ok=True)
        return
    write_atomic(path, "".join(json.dumps(r.to_row(), sort_keys=True) + "\n" for r in unique.values()))


def still_unfinished(previous: Iterable[Unfinished], *, evaluated_ids: Iterable[str],
                     new: Iterable[Unfinished]) -> list[Unfinished]:
    """What stays unfinished after a session: the earlier records whose candidate was not
    evaluated since (by candidate id) and that this session did not record again, then
    this session's records."""
    new = list(new)
    done = set(evaluated_ids) | {r.candidate.candidate_id for r in new}
    return [r for r in previous if r.candidate.candidate_id not in done] + new
