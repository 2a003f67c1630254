"""Compiler seeds: candidates that start where torch.compile ends (Inductor's kernels and
wrapper held as plain source; see seed.py)."""

from foundry.seeds.seed import Seed, inductor_seed, size_sets

__all__ = ["Seed", "inductor_seed", "size_sets"]
