"""`best/<task>.py`: the best correct kernel of a task as a runnable file.

The candidate's source with its module-level `PARAMS = {...}` replaced by the tuned
values (or, where the file has none, `PARAMS` added after the imports), and a header
saying what it is and how fast it was measured.
"""

from __future__ import annotations

import ast
import json
import pprint

from foundry.store.rundir import RunDir, write_atomic
from foundry.types import Candidate, EvalResult


def _params_span(tree: ast.Module) -> tuple[int, int] | None:
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, ast.AnnAssign) else [])
        if any(isinstance(t, ast.Name) and t.id == "PARAMS" for t in targets):
            return node.lineno, node.end_lineno or node.lineno
    return None


def _after_imports(tree: ast.Module) -> int:
    line = 0
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)) or (
                isinstance(node, ast.Expr) and isinstance(getattr(node, "value", None), ast.Constant)
                and line == 0):
            line = node.end_lineno or node.lineno
        else:
            break
    return line


def runnable_source(candidate: Candidate) -> str:
    """The candidate's source with `PARAMS` set to its tuned params (unchanged if none)."""
    if not candidate.params:
        return candidate.source
    params_line = "PARAMS = " + pprint.pformat(dict(candidate.params), sort_dicts=True)
    try:
        tree = ast.parse(candidate.source)
    except SyntaxError:
        return candidate.source + "\n\n" + params_line + "\n"
    lines = candidate.source.splitlines()
    span = _params_span(tree)
    if span is not None:
        start, end = span
        lines[start - 1:end] = [params_line]
    else:
        at = _after_imports(tree)
        lines[at:at] = ["", params_line, ""]
    return "\n".join(lines) + "\n"


def header(candidate: Candidate, result: EvalResult) -> str:
    def fmt(x):
        return "n/a" if x is None else f"{x:.3f}x"
    return (f"# KernelFoundry best kernel for task {candidate.task_id}\n"
            f"# candidate {candidate.candidate_id}, backend {candidate.backend}, "
            f"island {candidate.island_id}, generation {candidate.generation}\n"
            f"# speedup vs eager {fmt(result.speedup_eager)}, vs torch.compile "
            f"{fmt(result.speedup_compile)}, measured on {result.hardware or result.device}\n"
            f"# tuned params: {json.dumps(dict(candidate.params), sort_keys=True)}\n")


def write_best(run_dir: RunDir, candidate: Candidate, result: EvalResult) -> None:
    """Write `best/<task>.py` for a correct candidate (atomically)."""
    write_atomic(run_dir.best_file(candidate.task_id), header(candidate, result) + runnable_source(candidate))
