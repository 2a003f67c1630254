"""Checkpoint files: one island's state as JSON, written atomically.

The state is written to a temporary file in the target's directory, flushed and
fsynced, then renamed over the target (`os.replace`), so a reader sees the old file or
the new one, never a torn one. The state holds the bin definitions, the archive, the
history, the generation counter, the migration bookkeeping and the RNG state, so a
restored island continues exactly where it stopped.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Mapping

MAGIC = "kernelfoundry-island"


class CheckpointError(ValueError):
    """A checkpoint file that cannot be read as an island state; names the file."""


def write_checkpoint(*, path: str | os.PathLike, state: Mapping[str, Any]) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    payload = json.dumps({"magic": MAGIC, "state": state}, separators=(",", ":"))
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    try:  # make the rename durable where the platform allows it
        dir_fd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:
        pass


def read_checkpoint(*, path: str | os.PathLike) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise CheckpointError(f"island checkpoint {path} does not exist") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"island checkpoint {path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("magic") != MAGIC:
        raise CheckpointError(f"{path} is not an island checkpoint")
    return data["state"]
