"""The baseline cache: eager and torch.compile times per task source + sizes, device,
hardware, thread count and torch version, on disk (one small JSON file per key)."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

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
    def __init__(self, directory: str):
        self.dir = Path(directory)
        self._mem: dict[str, Baseline] = {}

    def get(self, key: str) -> Baseline | None:
        if key in self._mem:
            return self._mem[key]
        path = self.dir / f"{key}.json"
        try:
            data = json.loads(path.read_text())
            b = Baseline(**{k: data.get(k) for k in ("eager_ms", "compile_ms", "compile_s")},
                         error=data.get("error") or "")
        except (OSError, ValueError, TypeError):
            return None
        self._mem[key] = b
        return b

    def put(self, key: str, value: Baseline) -> None:
        self._mem[key] = value
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.dir, suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                json.dump({**asdict(value), "torch": torch.__version__}, f)
            os.replace(tmp, self.dir / f"{key}.json")
        except OSError:
            pass  # an unwritable cache only costs time
