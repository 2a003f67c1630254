"""Two end-to-end times taken side by side in this process (foundry.deploy.choose): the
model handed back and the user's original in eager mode."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SideBySide:
    swapped_ms: float  # the model handed back
    original_ms: float  # the user's model as it was, eager

    @property
    def speedup(self) -> float:
        return self.original_ms / self.swapped_ms if self.swapped_ms > 0 else float("inf")

    @property
    def faster(self) -> bool:
        return self.swapped_ms < self.original_ms
