"""A small on-disk cache of JSON records, one file per key, shared by processes.

Keys are hex digests (e.g. from `foundry.types.content_hash`); a record is a JSON object.
Writes go to a temporary file that is then renamed, so processes sharing a directory
never read half a record. An unreadable or unwritable cache only costs time: `get`
returns None and `put` keeps the record in this process only.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

_KEY = re.compile(r"[0-9a-f]{8,64}")


class JsonDiskCache:
    """Records under `directory/<key>.json`, with an in-process copy of those seen."""

    def __init__(self, directory: str | os.PathLike):
        self.dir = Path(directory)
        self._mem: dict[str, dict] = {}

    @staticmethod
    def _checked(key: str) -> str:
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise ValueError(f"cache key must be 8-64 lowercase hex digits, got {key!r}")
        return key

    def get(self, key: str) -> dict | None:
        key = self._checked(key)
        if key in self._mem:
            return dict(self._mem[key])
        try:
            data = json.loads((self.dir / f"{key}.json").read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict):
            return None
        self._mem[key] = data
        return dict(data)

    def put(self, key: str, record: dict) -> None:
        key = self._checked(key)
        if not isinstance(record, dict):
            raise ValueError(f"a cache record must be a dict, got {type(record).__name__}")
        text = json.dumps(record)  # raises here, naming the value, if it is not plain JSON
        self._mem[key] = json.loads(text)
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.dir, suffix=".tmp")
            try:
                with os.fdopen(fd, "w") as f:
                    f.write(text)
                os.replace(tmp, self.dir / f"{key}.json")
            except OSError:
                os.unlink(tmp)
                raise
        except OSError:
            pass  # an unwritable cache only costs time
