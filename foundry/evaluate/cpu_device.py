"""The CPU side of the device interface (see foundry.evaluate.device)."""

from __future__ import annotations

import platform
from typing import Any

import torch


class CpuDevice:
    name = "cpu"

    def prepare_worker(self, threads: int) -> None:
        torch.set_num_threads(threads)

    def hardware_id(self, threads: int) -> str:
        return f"cpu:{platform.machine()}:{threads}-threads"

    def to_device(self, value: Any) -> Any:
        return value

    def synchronize(self) -> None:
        return None

    def poison(self, enabled: bool) -> None:
        # With deterministic algorithms on, torch fills every uninitialised allocation
        # (empty, empty_like, new_empty, resize) with NaN for floats and the max value
        # for integers, so an output the kernel never wrote cannot pass as correct.
        torch.use_deterministic_algorithms(enabled, warn_only=True)
        import torch.utils.deterministic as det
        det.fill_uninitialized_memory = True

    def static_patterns(self) -> dict[str, list[str]]:
        return {}

    def time_forward(self, call, input_sets, *, clock, params, on_start=lambda: None,
                     on_block=None) -> dict:
        from foundry.evaluate.cpu_timing import time_forward
        return time_forward(call, input_sets, clock=clock, params=params,
                            synchronize=self.synchronize, on_start=on_start, on_block=on_block)
