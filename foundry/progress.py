"""What a person watching a run sees: per task, the best speedup vs eager and vs
torch.compile, evaluations, the share correct, LLM spend; for the run, ETA.

On a terminal the table is redrawn in place (`live`); otherwise (`log`) one plain line
per task is printed every `every_s` seconds, and nothing else.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import IO, Iterable

from foundry.store.phases import PhaseSums, judged_per_minute
from foundry.types import Candidate, EvalResult


@dataclass
class TaskProgress:
    task_id: str
    evaluations: int = 0
    correct: int = 0
    best_eager: float | None = None
    best_compile: float | None = None  # of the kernel that is best vs eager
    llm_cost_usd: float = 0.0
    status: str = ""  # why the task stopped, when it did

    def add(self, candidate: Candidate, result: EvalResult) -> bool:
        """Count one evaluation; True when it is the task's new best."""
        self.evaluations += 1
        if not result.correct:
            return False
        self.correct += 1
        s = result.speedup_eager
        if s is not None and (self.best_eager is None or s > self.best_eager):
            self.best_eager, self.best_compile = s, result.speedup_compile
            return True
        return False

    @property
    def share_correct(self) -> float:
        return self.correct / self.evaluations if self.evaluations else 0.0


@dataclass
class RunProgress:
    tasks: dict[str, TaskProgress]
    budget_evaluations: int | None = None
    wall_time_s: float | None = None
    started: float = field(default_factory=time.monotonic)
    session_evaluations: int = 0  # evaluations of this driver session (for the rate)
    session_phases: PhaseSums = field(default_factory=PhaseSums)  # judge time per phase, this session
    session_times: list = field(default_factory=list)  # unix time each evaluation of this session was recorded

    @staticmethod
    def for_tasks(task_ids: Iterable[str], **kw) -> "RunProgress":
        return RunProgress(tasks={t: TaskProgress(t) for t in task_ids}, **kw)

    @property
    def evaluations(self) -> int:
        return sum(t.evaluations for t in self.tasks.values())

    @property
    def llm_cost_usd(self) -> float:
        return sum(t.llm_cost_usd for t in self.tasks.values())

    def record(self, candidate: Candidate, result: EvalResult, *, session: bool = True,
               at: float | None = None) -> bool:
        """Count one evaluation (`session`: recorded by this driver session, at unix time
        `at`, now by default); True when it is its task's new best."""
        task = self.tasks.setdefault(candidate.task_id, TaskProgress(candidate.task_id))
        if session:
            self.session_evaluations += 1
            self.session_phases.add(task_id=candidate.task_id, result=result)
            self.session_times.append(time.time() if at is None else at)
        return task.add(candidate, result)

    @property
    def judged_per_minute(self) -> float | None:
        """This session's steady-state rate of judged candidates (`judged_per_minute`)."""
        return judged_per_minute({"": self.session_times})

    def session_summary(self) -> dict:
        """This session's figures for run.json: evaluations, judged per minute, phases."""
        rate = self.judged_per_minute
        return {"evaluations": self.session_evaluations,
                "judged_per_min": None if rate is None else round(rate, 3),
                **self.session_phases.to_json()}

    def eta_s(self, now: float | None = None) -> float | None:
        elapsed = (now or time.monotonic()) - self.started
        left = []
        if self.wall_time_s is not None:
            left.append(max(0.0, self.wall_time_s - elapsed))
        if self.budget_evaluations is not None and self.session_evaluations and elapsed > 0:
            rate = self.session_evaluations / elapsed
            left.append(max(0, self.budget_evaluations - self.evaluations) / rate)
        return min(left) if left else None


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def _dur(s: float | None) -> str:
    if s is None:
        return "?"
    s = int(s)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def _rate(p: RunProgress) -> str:
    rate = p.judged_per_minute
    return "" if rate is None else f" ({rate:.1f}/min)"


def task_line(t: TaskProgress) -> str:
    return (f"{t.task_id}: best {_x(t.best_eager)} vs eager, {_x(t.best_compile)} vs torch.compile; "
            f"{t.evaluations} evaluations, {t.share_correct:.0%} correct, LLM ${t.llm_cost_usd:.4f}"
            + (f" [{t.status}]" if t.status else ""))


def render_table(p: RunProgress, *, width: int = 100) -> list[str]:
    elapsed = time.monotonic() - p.started
    budget = f"/{p.budget_evaluations}" if p.budget_evaluations is not None else ""
    head = (f"KernelFoundry  {p.evaluations}{budget} evaluations{_rate(p)}  LLM ${p.llm_cost_usd:.4f}  "
            f"elapsed {_dur(elapsed)}  ETA {_dur(p.eta_s())}")
    name_w = max([4] + [len(t) for t in p.tasks])
    name_w = min(name_w, max(12, width - 60))
    rows = [head, f"{'task':<{name_w}}  {'vs eager':>9} {'vs compile':>10} {'evals':>6} {'correct':>7} {'LLM $':>8}  status"]
    for t in p.tasks.values():
        rows.append(f"{t.task_id[:name_w]:<{name_w}}  {_x(t.best_eager):>9} {_x(t.best_compile):>10} "
                    f"{t.evaluations:>6} {t.share_correct:>7.0%} {t.llm_cost_usd:>8.4f}  {t.status}")
    return [r[:width] for r in rows]


class ProgressView:
    """`mode`: live (redraw on a terminal), log (plain lines), off, or auto (live on a
    TTY, else log)."""

    def __init__(self, progress: RunProgress, *, mode: str = "auto", every_s: float = 10.0,
                 stream: IO[str] | None = None):
        self.progress, self.stream = progress, stream or sys.stdout
        if mode == "auto":
            mode = "live" if getattr(self.stream, "isatty", lambda: False)() else "log"
        self.mode, self.every_s = mode, every_s
        self._last = float("-inf")
        self._drawn = 0

    def say(self, line: str) -> None:
        """A one-off message (start, stop, warnings): always shown unless mode is off."""
        if self.mode != "off":
            self._clear()
            print(line, file=self.stream, flush=True)

    def _clear(self) -> None:
        if self.mode == "live" and self._drawn:
            self.stream.write(f"\x1b[{self._drawn}F\x1b[J")
            self._drawn = 0

    def update(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if self.mode == "off":
            return
        if self.mode == "live":
            if not force and now - self._last < 0.5:
                return
            self._last = now
            self._clear()
            lines = render_table(self.progress)
            self.stream.write("\n".join(lines) + "\n")
            self.stream.flush()
            self._drawn = len(lines)
            return
        if not force and now - self._last < self.every_s:
            return
        self._last = now
        p = self.progress
        budget = f"/{p.budget_evaluations}" if p.budget_evaluations is not None else ""
        print(f"[progress] {p.evaluations}{budget} evaluations{_rate(p)}, LLM ${p.llm_cost_usd:.4f}, "
              f"ETA {_dur(p.eta_s())}", file=self.stream, flush=True)
        for t in p.tasks.values():
            print(f"[progress]   {task_line(t)}", file=self.stream, flush=True)

    def close(self) -> None:
        self.update(force=True)
        self._drawn = 0
