"""A small JSON cache of tuned parameters, keyed by candidate family, task shape and
device; written atomically (temp file + rename) so concurrent writers never leave a
torn file."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


class TuningCache:
    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path else None

    def _read(self) -> dict:
        if self.path is None or not self.path.exists():
            return {}
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def get(self, key: str) -> dict | None:
        hit = self._read().get(key)
        return hit if isinstance(hit, dict) else None

    def put(self, key: str, entry: dict) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = self._read()
        data[key] = entry
        fd, tmp = tempfile.mkstemp(prefix=".tuning-", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(data, f, indent=1, sort_keys=True)
            os.replace(tmp, self.path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
