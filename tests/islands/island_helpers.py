"""Helpers for the island tests: real candidates (corpus kernels) and results."""

from __future__ import annotations

import itertools
import pathlib
import re

from foundry.types import Candidate, EvalResult

CORPUS = pathlib.Path(__file__).parent / "corpus"
BACKEND_OF_PREFIX = {"triton": "triton", "cuda": "cuda", "cudainline": "cuda_inline", "c": "c"}
_counter = itertools.count()


def corpus_files() -> list[pathlib.Path]:
    return sorted(CORPUS.glob("*.py"))


def backend_of(path: pathlib.Path) -> str:
    return BACKEND_OF_PREFIX[path.name.split("_")[0]]


def expected_levels(path: pathlib.Path) -> tuple[int, int, int]:
    m = re.search(r"^# expect: memory=(\d) compute=(\d) parallelism=(\d)$",
                  path.read_text(), re.M)
    assert m, f"{path.name} has no '# expect:' header"
    return tuple(int(x) for x in m.groups())


def make_candidate(*, task_id: str = "level1/19_ReLU", island_id: int = 0,
                   source: str | None = None, backend: str = "triton",
                   parent_ids: tuple = (), tag: str | None = None,
                   corpus: str | None = None) -> Candidate:
    """A candidate; unique unless `tag`/`source` repeat. `corpus`: a corpus file name."""
    if corpus is not None:
        path = CORPUS / corpus
        source = path.read_text()
        backend = backend_of(path)
    if source is None:
        source = (CORPUS / "triton_relu_block.py").read_text()
    tag = tag if tag is not None else f"v{next(_counter)}"
    return Candidate.make(task_id=task_id, source=source + f"\n# variant {tag}\n",
                          backend=backend, island_id=island_id, parent_ids=parent_ids)


def make_result(candidate: Candidate, *, stage: int = 5, speedup: float | None = 1.0
                ) -> EvalResult:
    correct = stage == 5
    return EvalResult(candidate_id=candidate.candidate_id, task_id=candidate.task_id,
                      stage=stage, correct=correct,
                      speedup_eager=speedup if correct else None,
                      error="" if correct else f"failed at stage {stage}")
