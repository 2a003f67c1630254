"""The setup step's gate: may this candidate run on this judge at all?

Before anything of it runs: it has a source, its backend is known and runs on this
judge's device (`admit_backend`); its static checks (static_checks.py, which the
Evaluator runs) found no syntax error and a class ModelNew (`static_refusal`). Other
static flags do not refuse it: they fail it with their evidence after its job.
"""

from __future__ import annotations

from dataclasses import dataclass

from foundry.evaluate.backends import BackendSpec, get_backend
from foundry.evaluate.static_checks import StaticReport
from foundry.types import Candidate, Stage


@dataclass(frozen=True)
class Refusal:
    """Why a candidate may not run: the stage it fails at and the error it fails with."""

    stage: Stage
    error: str


def admit_backend(cand: Candidate, *, device: str) -> BackendSpec | Refusal:
    """`cand`'s backend where it may run on `device`, else why not."""
    if not cand.source.strip():
        return Refusal(Stage.SYNTAX, cand.note or "the candidate has no source")
    try:
        backend = get_backend(cand.backend)
    except ValueError as e:
        return Refusal(Stage.SYNTAX, str(e))
    devices = ("cpu", "cuda") if backend.name == "triton" else (backend.device,)
    if device not in devices:
        return Refusal(Stage.COMPILE, f"backend {backend.name!r} runs on {backend.device}, this evaluator on {device}")
    return backend


def static_refusal(static: StaticReport) -> Refusal | None:
    """The static checks' refusal (a syntax error, no class ModelNew), else None."""
    if static.syntax_error:
        return Refusal(Stage.SYNTAX, static.syntax_error)
    if "no_model_new" in static.flags:
        return Refusal(Stage.COMPILE, "the candidate defines no class ModelNew")
    return None
