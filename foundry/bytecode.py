"""Compiled bytecode for the modules the judge and its workers import, where Python is
told not to write any (PYTHONDONTWRITEBYTECODE, `-B`) and the installed packages ship
none.

Some images set that and ship no `__pycache__`: every process then compiles torch,
sympy and the rest from source again, seconds per process (the judge, each lane's warm
worker, every CLI call). `keep_bytecode()` then points `sys.pycache_prefix` at
<cache root>/pycache and lets Python write there, so each module is compiled once per
machine; installed packages stay untouched. Where the packages do carry bytecode (a
normal `pip install`), Python reads theirs and nothing changes: a prefix would make it
ignore those files. A sandboxed candidate cannot write the folder under
operating-system isolation (it is not one of the build caches). Off with
FOUNDRY_BYTECODE_CACHE=0; a no-op where Python writes bytecode anyway or a prefix is set.
"""

from __future__ import annotations

import importlib.util
import os
import sys

from foundry.paths import cache_root

ENV = "FOUNDRY_BYTECODE_CACHE"


def installed_bytecode(sample: str = "torch") -> bool:
    """Whether the installed package `sample` carries compiled bytecode beside its source
    (True where it cannot be found: nothing to change then). Imports nothing."""
    spec = importlib.util.find_spec(sample)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return True
    return os.path.exists(importlib.util.cache_from_source(spec.origin))


def keep_bytecode(*, sample: str = "torch") -> str | None:
    """The bytecode folder now in use by this process because of this call, or None.
    `sample`: the installed package whose bytecode (or its absence) decides."""
    if os.environ.get(ENV, "1") == "0" or not sys.dont_write_bytecode or sys.pycache_prefix:
        return None
    if installed_bytecode(sample):
        return None
    path = cache_root() / "pycache"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None  # a read-only cache root: compile from source as before
    sys.pycache_prefix = str(path)
    sys.dont_write_bytecode = False
    return str(path)
