"""Island: one MAP-Elites population of kernels for one task.

It holds the archive, the island's full history (every candidate it evaluated or
received, failures included: they feed repair prompts), its own generation counter
(advanced by each evaluated child it adds, never by another island) and its own RNG.
A child always lands on its parent's island: `add` refuses a candidate whose
`island_id` is another island's, or whose parents this island never held.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import random
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from foundry.types import Candidate, EvalResult, ProposalRequest, Task
from islands.archive import Archive
from islands.bins import Bins
from islands.config import IslandConfig
from islands.descriptors import Descriptor, describe
from islands.records import ArchiveStats, Elite, HistoryEntry, InsertStatus, fitness_of
from islands.selection import ParentSelector, Selection

STATE_VERSION = 1
DESCRIPTOR_CACHE = 512  # descriptors kept for hints of recently seen candidates


@dataclass(frozen=True)
class AddOutcome:
    """What `Island.add` did: the archive status, the cell, the descriptor, the result
    with its `descriptor` field filled in, and the island's generation after the add."""

    status: InsertStatus
    cell: tuple
    descriptor: Descriptor
    result: EvalResult
    generation: int


@dataclass(frozen=True)
class RequestContext:
    """What the island wants next. mode: "translate" (empty archive: no parent),
    "optimize" (a correct parent) or "repair" (a failed parent). selection: the mode
    that chose the parent ("none" when translating)."""

    island_id: int
    generation: int
    mode: str
    selection: str
    parent: Elite | None
    inspirations: tuple
    descriptor_hint: str
    seed: int

    def proposal_request(self, *, task: Task, backend: str, **extra: Any) -> ProposalRequest:
        """The ProposalRequest for this context (extra: prompt_id, hardware, ...)."""
        return ProposalRequest(
            task=task, backend=backend, mode=self.mode, island_id=self.island_id,
            generation=self.generation,
            parent=self.parent.candidate if self.parent else None,
            parent_result=self.parent.result if self.parent else None,
            inspirations=tuple((e.candidate, e.result) for e in self.inspirations),
            descriptor_hint=self.descriptor_hint, seed=self.seed, **extra)


class Island:
    """One island. See islands/__init__.py for the API in brief."""

    def __init__(self, *, island_id: int, task_id: str, config: IslandConfig | None = None,
                 seed: int = 0, bins: Bins | None = None):
        if isinstance(island_id, bool) or not isinstance(island_id, int) or island_id < 0:
            raise ValueError(f"island_id must be a non-negative integer, got {island_id!r}")
        self.island_id = island_id
        self.task_id = task_id
        self.config = config or IslandConfig()
        self.seed = seed
        self.bins = bins or Bins.default(extra_axes=self.config.extra_axes)
        self.archive = Archive(bins=self.bins)
        self._selector = ParentSelector(weights=self.config.selection_weights,
                                        temperature=self.config.softmax_temperature)
        self._rng = random.Random(seed)
        self._generation = 0
        self._last_migration = 0
        self._history: list[HistoryEntry] = []
        self._with_code: list[HistoryEntry] = []  # entries the random mode may pick
        self._known: set[str] = set()  # candidate ids held (evaluated or received)
        self._emigrated: set[str] = set()  # candidate ids already sent away
        self._descriptors: collections.OrderedDict[str, Descriptor] = \
            collections.OrderedDict()  # recent descriptors (derived data, not saved)

    # -- reading ---------------------------------------------------------------------
    @property
    def generation(self) -> int:
        return self._generation

    @property
    def history(self) -> tuple[HistoryEntry, ...]:
        """Every candidate evaluated or received here, oldest first (a copy)."""
        return tuple(self._history)

    def knows(self, candidate_id: str) -> bool:
        return candidate_id in self._known

    def recent_failures(self, *, limit: int = 5) -> list[HistoryEntry]:
        """The latest incorrect entries, newest first (material for repair prompts)."""
        out = []
        for h in reversed(self._history):
            if not h.result.correct:
                out.append(h)
                if len(out) >= limit:
                    break
        return out

    def stats(self) -> ArchiveStats:
        return self.archive.stats()

    def describe(self, candidate: Candidate) -> tuple[Descriptor, tuple]:
        """The candidate's descriptor and its cell in this island's bins."""
        d = self._descriptors.get(candidate.candidate_id)
        if d is None or d.backend != candidate.backend:
            d = describe(source=candidate.source, backend=candidate.backend)
            self._remember(candidate.candidate_id, d)
        return d, self.bins.cell(d.values(axis_names=self.bins.names))

    def _remember(self, candidate_id: str, descriptor: Descriptor) -> None:
        self._descriptors[candidate_id] = descriptor
        if len(self._descriptors) > DESCRIPTOR_CACHE:
            self._descriptors.popitem(last=False)

    # -- choosing what comes next ----------------------------------------------------
    def select_parent(self) -> Selection | None:
        """A parent and the mode that chose it; None while the archive is empty."""
        return self._selector.select(archive=self.archive, history=self._with_code,
                                     rng=self._rng)

    def inspirations(self, *, parent: Elite | None, k: int | None = None) -> list[Elite]:
        """Elites of THIS island's archive from cells other than the parent's."""
        k = self.config.num_inspirations if k is None else k
        return self._selector.inspirations(archive=self.archive, parent=parent, k=k,
                                           rng=self._rng)

    def next_request_context(self) -> RequestContext:
        sel = self.select_parent()
        if sel is None:
            return RequestContext(island_id=self.island_id, generation=self._generation,
                                  mode="translate", selection="none", parent=None,
                                  inspirations=(), descriptor_hint="",
                                  seed=self._rng.getrandbits(31))
        parent = sel.parent
        hint = self.describe(parent.candidate)[0].hint()
        return RequestContext(
            island_id=self.island_id, generation=self._generation,
            mode="optimize" if parent.correct else "repair", selection=sel.mode,
            parent=parent, inspirations=tuple(self.inspirations(parent=parent)),
            descriptor_hint=hint, seed=self._rng.getrandbits(31))

    # -- adding evaluated children ---------------------------------------------------
    def would_enter(self, *, candidate: Candidate, result: EvalResult) -> bool:
        """Whether `add` would make the candidate an elite now: it has code and its
        fitness beats its cell's elite (or the cell is empty). Changes nothing."""
        if not candidate.source:
            return False
        _, cell = self.describe(candidate)
        current = self.archive.get(cell)
        return current is None or fitness_of(result) > current.fitness

    def add(self, *, candidate: Candidate, result: EvalResult,
            descriptor: Descriptor | None = None) -> AddOutcome:
        """Record an evaluated child of this island, insert it, advance the generation.
        `descriptor`: the candidate's `describe(...)` when already computed elsewhere
        (e.g. next to the evaluation); otherwise the island analyses the source."""
        self._check_own(candidate, result)
        if candidate.island_id != self.island_id:
            raise ValueError(
                f"candidate {candidate.candidate_id} belongs to island {candidate.island_id},"
                f" not island {self.island_id}: a child lands on its parent's island")
        unknown = [p for p in candidate.parent_ids if p not in self._known]
        if unknown:
            raise ValueError(
                f"candidate {candidate.candidate_id}: parent(s) {unknown} were never on "
                f"island {self.island_id}; a child lands on its parent's island")
        if descriptor is not None:
            if descriptor.backend != candidate.backend:
                raise ValueError(f"candidate {candidate.candidate_id}: descriptor is for "
                                 f"backend {descriptor.backend!r}, not {candidate.backend!r}")
            self._remember(candidate.candidate_id, descriptor)
        descriptor, cell = self.describe(candidate)
        if tuple(result.descriptor) != cell:
            result = dataclasses.replace(result, descriptor=cell)
        fitness = fitness_of(result)
        if candidate.source:
            status = self.archive.insert(candidate=candidate, result=result, cell=cell,
                                         generation=self._generation,
                                         home_island=self.island_id)
        else:  # no code was extracted: history only (it feeds repair prompts)
            status = InsertStatus.REJECTED
        self._record(HistoryEntry(candidate=candidate, result=result, cell=cell,
                                  fitness=fitness, generation=self._generation,
                                  status=status, home_island=self.island_id))
        self._generation += 1
        return AddOutcome(status=status, cell=cell, descriptor=descriptor, result=result,
                          generation=self._generation)

    def _check_own(self, candidate: Candidate, result: EvalResult) -> None:
        if candidate.task_id != self.task_id:
            raise ValueError(f"candidate {candidate.candidate_id} is for task "
                             f"{candidate.task_id!r}, island {self.island_id} runs "
                             f"{self.task_id!r}")
        if result.candidate_id != candidate.candidate_id:
            raise ValueError(f"result is for candidate {result.candidate_id}, not "
                             f"{candidate.candidate_id}")

    def _record(self, entry: HistoryEntry) -> None:
        self._history.append(entry)
        if entry.candidate.source:
            self._with_code.append(entry)
        self._known.add(entry.candidate.candidate_id)

    # -- migration -------------------------------------------------------------------
    def migration_due(self) -> bool:
        return self._generation - self._last_migration >= self.config.migration_interval

    def emigrants(self) -> list[Elite]:
        """The top `migration_fraction` of this island's own (non-migrant) elites, minus
        those already sent; marks this generation as the last migration."""
        own = [e for e in self.archive.elites() if not e.is_migrant]
        count = math.ceil(self.config.migration_fraction * len(own)) if own else 0
        top = sorted(own, key=lambda e: -e.fitness)[:count]
        out = [e for e in top if e.candidate_id not in self._emigrated]
        self._emigrated.update(e.candidate_id for e in out)
        self._last_migration = self._generation
        return out

    def immigrate(self, *, elites: Sequence[Elite]) -> list[InsertStatus]:
        """Receive elites from another island: copies deduplicated by content hash,
        marked as migrants, inserted under this island's own rules (its bins, its
        archive). The generation does not advance."""
        statuses = []
        for e in elites:
            if e.is_migrant:
                raise ValueError(f"candidate {e.candidate_id} is already a migrant; "
                                 f"a migrant never migrates again")
            if e.candidate.task_id != self.task_id:
                raise ValueError(f"migrant {e.candidate_id} is for task "
                                 f"{e.candidate.task_id!r}, not {self.task_id!r}")
            if e.candidate_id in self._known:
                statuses.append(InsertStatus.DUPLICATE)
                continue
            copy = dataclasses.replace(e.candidate, island_id=self.island_id,
                                       origin="migrant")
            _, cell = self.describe(copy)
            result = e.result if tuple(e.result.descriptor) == cell else \
                dataclasses.replace(e.result, descriptor=cell)
            status = self.archive.insert(candidate=copy, result=result, cell=cell,
                                         generation=self._generation, is_migrant=True,
                                         home_island=e.home_island)
            self._record(HistoryEntry(candidate=copy, result=result, cell=cell,
                                      fitness=fitness_of(result),
                                      generation=self._generation, status=status,
                                      is_migrant=True, home_island=e.home_island))
            statuses.append(status)
        return statuses

    # -- checkpoints -----------------------------------------------------------------
    def save(self, path: str) -> None:
        """Write a checkpoint atomically (temp file, then rename)."""
        from islands.checkpoint import write_checkpoint
        write_checkpoint(path=path, state=self.state_dict())

    @classmethod
    def load(cls, path: str) -> "Island":
        from islands.checkpoint import read_checkpoint
        return cls.from_state(read_checkpoint(path=path))

    def state_dict(self) -> dict[str, Any]:
        version, internal, gauss = self._rng.getstate()
        return {
            "version": STATE_VERSION, "island_id": self.island_id, "task_id": self.task_id,
            "config": self.config.to_dict(), "seed": self.seed,
            "generation": self._generation, "last_migration": self._last_migration,
            "rng": [version, list(internal), gauss],
            "archive": self.archive.state_dict(),
            "history": [_entry_row(h) for h in self._history],
            "emigrated": sorted(self._emigrated),
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> "Island":
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"island checkpoint version {state.get('version')!r} is not "
                             f"supported (expected {STATE_VERSION})")
        archive = Archive.from_state(state["archive"])
        island = cls(island_id=int(state["island_id"]), task_id=state["task_id"],
                     config=IslandConfig.from_config(state["config"]),
                     seed=state["seed"], bins=archive.bins)
        island.archive = archive
        island._generation = int(state["generation"])
        island._last_migration = int(state["last_migration"])
        version, internal, gauss = state["rng"]
        island._rng.setstate((version, tuple(internal), gauss))
        for row in state["history"]:
            island._record(_entry_from_row(row))
        island._emigrated = set(state["emigrated"])
        return island


def _entry_row(h: HistoryEntry) -> dict[str, Any]:
    return {"candidate": h.candidate.to_row(), "result": h.result.to_row(),
            "cell": list(h.cell), "fitness": h.fitness, "generation": h.generation,
            "status": h.status.value, "is_migrant": h.is_migrant,
            "home_island": h.home_island}


def _entry_from_row(row: Mapping[str, Any]) -> HistoryEntry:
    return HistoryEntry(candidate=Candidate.from_row(row["candidate"]),
                        result=EvalResult.from_row(row["result"]), cell=tuple(row["cell"]),
                        fitness=float(row["fitness"]), generation=int(row["generation"]),
                        status=InsertStatus(row["status"]), is_migrant=bool(row["is_migrant"]),
                        home_island=int(row["home_island"]))
