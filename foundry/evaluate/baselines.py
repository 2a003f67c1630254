"""The baseline cache: eager and torch.compile times per task source + sizes, device,
hardware, thread count and torch version, on disk (one small JSON file per key)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

import torch

from foundry.evaluate.disk_cache import JsonDiskCache
from foundry.types import Task, content_hash


@dataclass(frozen=True)
class Baseline:
    eager_ms: float | None
    compile_ms: float | None = None
    compile_s: float | None = None  # time torch.compile took to build
    error: str = ""


def baseline_key(task: Task, *, device: str, hardware: str, threads: int) -> str:
    return content_hash(task.source, json.dumps(task.size_overrides, sort_keys=True, default=str),
                        device, hardware, str(threads), torch.__version__)


class BaselineCache:
    """Baselines on disk under `directory` (a `JsonDiskCache`), one record per key."""

    def __init__(self, directory: str):
        self._records = JsonDiskCache(directory)
        self.dir = self._records.dir

    def get(self, key: str) -> Baseline | None:
        data = self._records.get(key)
        if data is None:
            return None
        try:
            return Baseline(**{k: data.get(k) for k in ("eager_ms", "compile_ms", "compile_s")},
                            error=data.get("error") or "")
        except TypeError:
            return None

    def put(self, key: str, value: Baseline) -> None:
        self._records.put(key, {**asdict(value), "torch": torch.__version__})
