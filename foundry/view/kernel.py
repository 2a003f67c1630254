"""One evaluated kernel as the page's kernel panel shows it: its source as highlighting
tokens, its diff against its parent, the judge's verdict and measurements.

The source is lexed here (pygments, on the server) into (CSS class, text) pairs; the page
puts each text into the document as a text node, so a candidate's source is never parsed
as markup and nothing in it runs.
"""

from __future__ import annotations

import difflib
import functools
from dataclasses import asdict, dataclass
from typing import Any, Mapping

from pygments.lexers import PythonLexer
from pygments.token import STANDARD_TYPES

from foundry.store.evallog import EvaluationRecord
from foundry.types import Stage
from foundry.view.jsonsafe import finite

SOURCE_LIMIT = 400_000  # characters of a source lexed; the rest is shown unhighlighted
DIFF_CONTEXT = 3


def _css_class(token_type) -> str:
    while token_type not in STANDARD_TYPES:
        token_type = token_type.parent
    return STANDARD_TYPES[token_type]


@functools.lru_cache(maxsize=2048)
def highlight(source: str) -> tuple:
    """The source as a flat tuple (class, text, class, text, ...), adjacent tokens of one
    class (and whitespace) merged into one; class "" is plain text. Line ends come out as "\n" (the lexer's)."""
    head, tail = source[:SOURCE_LIMIT], source[SOURCE_LIMIT:]
    out: list[str] = []
    for token_type, text in PythonLexer(stripnl=False, ensurenl=False).get_tokens(head):
        cls = _css_class(token_type)
        if out and (out[-2] == cls or text.isspace()):  # whitespace shows the same in any class
            out[-1] += text
        else:
            out += [cls, text]
    if tail:
        out += ["", tail]
    return tuple(out)


def diff_lines(parent: str, child: str, *, parent_name: str, child_name: str) -> tuple:
    """Unified diff of parent -> child as (kind, line) pairs, kind one of
    "+", "-", " ", "@" (hunk header) and "h" (file header)."""
    out = []
    for line in difflib.unified_diff(parent.splitlines(), child.splitlines(), fromfile=parent_name,
                                     tofile=child_name, n=DIFF_CONTEXT, lineterm=""):
        kind = "h" if line.startswith(("---", "+++")) else line[:1] if line[:1] in "+-@" else " "
        out.append((kind, line))
    return tuple(out)


@dataclass(frozen=True)
class KernelDetail:
    eval_id: str
    candidate: dict  # id, task, backend, island, generation, strategy, origin, parents, params, note
    verdict: dict  # stage, correct, error, flags, errors against the reference
    timing: dict  # runtime median and spread, baselines, speedups, build and judge seconds
    roofline: dict | None
    hardware: dict | None  # source and diagnosis of the hardware profile, and its counters
    kernels: Any  # metrics["kernels"]: the device profiler's kernels of one trial, if measured
    metrics: dict  # every metric the judge recorded
    tokens: tuple  # highlight(source)
    parent_eval_id: str | None
    diff: tuple | None  # diff_lines against the first parent; None when it is not in the log
    diff_note: str
    evaluator: str
    recorded_at: float


def _hardware(metrics: Mapping[str, Any]) -> dict | None:
    profile = metrics.get("hardware")
    counters = {k[len("ncu_"):]: v for k, v in metrics.items() if k.startswith("ncu_")}
    if not isinstance(profile, Mapping) and not counters:
        return None
    return {**(dict(profile) if isinstance(profile, Mapping) else {}), "counters": counters}


def kernel_detail(record: EvaluationRecord, parents: Mapping[str, EvaluationRecord]) -> KernelDetail:
    """The panel's view of `record`; `parents` maps candidate ids to records (for the diff)."""
    c, r = record.candidate, record.result
    metrics = dict(r.metrics or {})
    parent = parents.get(c.parent_ids[0]) if c.parent_ids else None
    if parent is not None:
        diff = diff_lines(parent.candidate.source, c.source, parent_name=f"parent {parent.candidate.candidate_id}",
                          child_name=f"candidate {c.candidate_id}")
        note = "" if diff else "same source as its parent (other parameters)"
    else:
        diff = None
        note = (f"parent {c.parent_ids[0]} is not in this run's evaluation log" if c.parent_ids
                else f"no parent ({c.origin})")
    roofline = metrics.get("roofline")
    return KernelDetail(
        eval_id=record.eval_id,
        candidate={"candidate_id": c.candidate_id, "task_id": c.task_id, "backend": c.backend,
                   "island": c.island_id, "generation": c.generation, "strategy": c.strategy_id,
                   "origin": c.origin, "parents": list(c.parent_ids), "params": dict(c.params), "note": c.note},
        verdict={"stage": Stage(int(r.stage)).label, "correct": r.correct, "error": r.error, "flags": list(r.flags),
                 "max_abs_err": r.max_abs_err, "max_rel_err": r.max_rel_err, "descriptor": list(r.descriptor),
                 "hardware": r.hardware, "device": r.device},
        timing={"runtime_ms": r.runtime_ms, "runtime_spread": r.runtime_spread, "eager_ms": r.eager_ms,
                "compile_ms": r.compile_ms, "speedup_eager": r.speedup_eager, "speedup_compile": r.speedup_compile,
                "compile_s": r.compile_s, "eval_s": r.eval_s},
        roofline=dict(roofline) if isinstance(roofline, Mapping) else None,
        hardware=_hardware(metrics), kernels=metrics.get("kernels"), metrics=metrics,
        tokens=highlight(c.source), parent_eval_id=parent.eval_id if parent else None,
        diff=diff, diff_note=note, evaluator=record.evaluator, recorded_at=record.recorded_at)


def detail_json(record: EvaluationRecord, parents: Mapping[str, EvaluationRecord]) -> dict[str, Any]:
    return finite(asdict(kernel_detail(record, parents)))
