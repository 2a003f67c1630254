"""`Twins`: the dispatcher's memory of what it judged, so that the same code for the same
task, proposed by another island or in a later session of the run, is not judged twice.

A settled outcome (the candidate as evaluated, its result, the evaluator's name) is kept
for the last `kept` (task, candidate id) pairs; a resumed run primes it with the verdicts
its earlier sessions logged. One exception: a TUNABLE candidate judged untuned because its
task had no correct kernel yet (`TUNING_DEFERRED` in its metrics) is judged again once the
task has one, so that its tuning is not lost to the first, untuned verdict; a verdict
reached after the task was covered stands, whatever it says (an evaluator that had not
heard of the coverage may have judged it untuned again). A candidate judged untuned
because the run's tuning waited for every task's first verdict (`TUNING_DEFERRED` set to
`BREADTH`) is judged again, tuned, once that wait is over and its task is covered. Pure
Python (no Ray): the dispatcher actor holds one.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Iterable

from foundry.types import Candidate, EvalResult

TUNING_DEFERRED = "tuning_deferred"  # metrics key: judged untuned while tuning waited for a correct kernel
BREADTH = "breadth"  # ... its value where tuning waited for every task of the run to have a verdict
KEPT = 1024  # settled outcomes kept


class Twins:
    def __init__(self, *, kept: int = KEPT) -> None:
        self.kept = int(kept)
        self._settled: OrderedDict[tuple[str, str], tuple[Candidate, EvalResult, str]] = OrderedDict()
        self._judging: set[tuple[str, str]] = set()
        self._covered: set[str] = set()  # tasks with a correct verdict
        self._reached: set[str] = set()  # tasks with a verdict
        self._standing: set[tuple[str, str]] = set()  # verdicts reached with their task covered

    def prime(self, records: Iterable[tuple[Candidate, EvalResult, str]]) -> int:
        """Earlier sessions' verdicts, oldest first: (candidate as logged, result, the
        evaluator that judged it). A record without an evaluator is a failure the
        dispatcher made itself (an evaluator lost), not a verdict, and is skipped.
        Returns how many were kept."""
        count = 0
        for candidate, result, evaluator in records:
            if evaluator:
                self._keep(candidate.task_id, candidate.candidate_id, (candidate, result, evaluator))
                count += 1
        return min(count, self.kept)

    def settled(self, task_id: str, candidate_id: str, *,
                tuning_open: bool = True) -> tuple[Candidate, EvalResult, str] | None:
        """The verdict to hand back for this code, or None where it is to be judged.
        `tuning_open`: whether the run's tuning still waits for every task's first verdict
        (False: an untuned verdict deferred for that wait stands for now)."""
        outcome = self._settled.get((task_id, candidate_id))
        if outcome is None:
            return None
        deferred = (outcome[1].metrics or {}).get(TUNING_DEFERRED)
        if deferred == BREADTH and not tuning_open:
            return outcome
        if deferred and task_id in self._covered and (task_id, candidate_id) not in self._standing:
            return None  # tuned now, it may do better than its untuned verdict
        return outcome

    def reached(self, task_id: str) -> bool:
        """Whether some candidate of the task has a verdict (correct or not)."""
        return task_id in self._reached

    def covered(self, task_id: str) -> bool:
        """Whether some candidate of the task was judged correct (in this run or, primed,
        an earlier session of it)."""
        return task_id in self._covered

    def judging(self, task_id: str, candidate_id: str) -> bool:
        return (task_id, candidate_id) in self._judging

    def start(self, task_id: str, candidate_id: str) -> None:
        self._judging.add((task_id, candidate_id))

    def finish(self, task_id: str, candidate_id: str, outcome: tuple[Candidate, EvalResult, str] | None) -> None:
        """The judging ended: with a verdict (`outcome`), or without one (None: a refusal,
        or a failure the dispatcher made)."""
        self._judging.discard((task_id, candidate_id))
        if outcome is not None:
            if task_id in self._covered and (outcome[1].metrics or {}).get(TUNING_DEFERRED) != BREADTH:
                self._standing.add((task_id, candidate_id))
            self._keep(task_id, candidate_id, outcome)

    def _keep(self, task_id: str, candidate_id: str, outcome: tuple[Candidate, EvalResult, str]) -> None:
        key = (task_id, candidate_id)
        self._settled[key] = outcome
        self._settled.move_to_end(key)
        self._reached.add(task_id)
        if outcome[1].correct:
            self._covered.add(task_id)
        while len(self._settled) > self.kept:
            self._standing.discard(self._settled.popitem(last=False)[0])
