"""Compiler seeds: candidates that start where torch.compile ends (Inductor's kernels and
wrapper held as plain source; see seed.py)."""

from foundry.seeds.result import Seed, SeedError
from foundry.seeds.seed import inductor_seed, size_sets

__all__ = ["Seed", "SeedError", "inductor_seed", "size_sets"]
