"""Islands: the quality-diversity search of KernelFoundry, as pure Python (no Ray).

    from islands import Island, IslandConfig, describe, Topology, migrate_due

    island = Island(island_id=0, task_id="level1/19_ReLU", config=IslandConfig(), seed=0)
    ctx = island.next_request_context()      # RequestContext: mode translate|optimize|repair,
                                             #   parent (Elite | None), inspirations, hint, seed
    request = ctx.proposal_request(task=task, backend="triton")   # a ProposalRequest
    outcome = island.add(candidate=child, result=result)          # AddOutcome: status, cell,
                                             #   descriptor, result (descriptor filled), generation
                                             # (descriptor=describe(...) skips the analysis)
    island.generation                        # this island's own counter (+1 per add)
    island.select_parent()                   # Selection(parent: Elite, mode) | None
    island.inspirations(parent=elite, k=3)   # elites of THIS island, other cells
    if island.migration_due():               # every migration_interval generations
        elites = island.emigrants()          # top fraction of own (non-migrant) elites
        other.immigrate(elites=elites)       # -> [InsertStatus]; deduplicated, flagged migrant
    island.save(path); Island.load(path)     # atomic JSON checkpoint, RNG state included

    describe(source=src, backend="cuda")     # Descriptor(levels=(m, c, p), matched, features)
    Descriptor.hint()                        # "memory level 1 (...); try level 2: ..."

Records: Elite (candidate, result, cell, fitness, generation, is_migrant, home_island),
HistoryEntry (the same plus status), InsertStatus (new, improved, rejected, duplicate),
ArchiveStats (coverage, qd_score, best_fitness, ...). Fitness: `fitness_of(result)`,
the ladder of EvalResult.fitness (a correct kernel always outranks an incorrect one).
"""

from islands.archive import Archive
from islands.bins import Axis, Bins
from islands.config import ConfigError, IslandConfig
from islands.descriptors import Descriptor, describe
from islands.island import AddOutcome, Island, RequestContext
from islands.migration import Topology, migrate_due
from islands.records import ArchiveStats, Elite, HistoryEntry, InsertStatus, fitness_of
from islands.selection import ParentSelector, Selection

__all__ = [
    "AddOutcome", "Archive", "ArchiveStats", "Axis", "Bins", "ConfigError", "Descriptor",
    "Elite", "HistoryEntry", "InsertStatus", "Island", "IslandConfig", "ParentSelector",
    "RequestContext", "Selection", "Topology", "describe", "fitness_of", "migrate_due",
]
