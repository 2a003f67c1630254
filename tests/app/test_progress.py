"""The progress view: plain lines when not on a terminal, a redrawn table on one."""

from __future__ import annotations

import io

from foundry.progress import ProgressView, RunProgress, render_table
from foundry.types import Candidate, EvalResult


def rec(task, cid, correct, speed=None):
    c = Candidate(candidate_id=cid, task_id=task, source="x", backend="c")
    r = EvalResult(candidate_id=cid, task_id=task, stage=5 if correct else 2, correct=correct,
                   speedup_eager=speed, speedup_compile=speed and speed / 2)
    return c, r


def test_figures_and_plain_lines_when_not_a_tty():
    p = RunProgress.for_tasks(["a", "b"], budget_evaluations=10, wall_time_s=100)
    assert p.record(*rec("a", "1", True, 1.5)) is True
    assert p.record(*rec("a", "2", True, 1.2)) is False
    p.record(*rec("a", "3", False))
    p.tasks["a"].llm_cost_usd = 0.25
    out = io.StringIO()  # not a TTY: "auto" means plain log lines
    view = ProgressView(p, mode="auto", every_s=60, stream=out)
    assert view.mode == "log"
    view.update()
    view.update()  # within every_s: nothing more
    text = out.getvalue()
    assert "\x1b[" not in text and text.count("[progress] 3/10 evaluations") == 1
    assert "a: best 1.50x vs eager, 0.75x vs torch.compile; 3 evaluations, 67% correct, LLM $0.2500" in text
    assert "b: best - vs eager" in text
    eta = p.eta_s()
    assert eta is not None and 0 < eta <= 100


def test_live_table_redraws_in_place():
    class Tty(io.StringIO):
        def isatty(self):
            return True
    p = RunProgress.for_tasks(["level1/08_ReLU"])
    p.record(*rec("level1/08_ReLU", "1", True, 2.0))
    out = Tty()
    view = ProgressView(p, stream=out)
    assert view.mode == "live"
    view.update(force=True)
    view.update(force=True)
    assert out.getvalue().count("\x1b[3F\x1b[J") == 1  # the second draw moved up over the first
    lines = render_table(p)
    assert "2.00x" in lines[2] and "100%" in lines[2]
