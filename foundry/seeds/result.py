"""What seed generation returns (`Seed`), and the one error family of its steps."""

from __future__ import annotations

from dataclasses import dataclass


BACKEND_FOR_DEVICE = {"cpu": "c", "cuda": "triton"}  # the backend a compiler seed is written in


class SeedError(ValueError):
    """A step of seed generation cannot go on for this task; the message says why (it
    becomes the note of a Seed without source)."""


@dataclass(frozen=True)
class Seed:
    """A compiler seed for one task: `source` (empty when there is none), its backend,
    how many kernels of its own it launches, and a note: what was captured, or why no seed;
    `out_of_memory`: there is none because the device ran out of memory (other work on it
    may have held the memory: worth another try once it is free)."""

    task_id: str
    device: str
    backend: str
    source: str
    kernels: int
    note: str
    specializations: int = 0
    out_of_memory: bool = False

    @property
    def ok(self) -> bool:
        return bool(self.source)


def no_seed(task_id: str, device: str, why: str, *, out_of_memory: bool = False) -> Seed:
    return Seed(task_id=task_id, device=device, backend="", source="", kernels=0, note=f"no seed: {why}",
                out_of_memory=out_of_memory)
