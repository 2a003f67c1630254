"""Where the project keeps what it caches on disk: $FOUNDRY_CACHE_DIR, by default
~/.cache/kernelfoundry (build caches, baselines, degeneracy verdicts, bytecode)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    return Path(os.environ.get("FOUNDRY_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "kernelfoundry"))
