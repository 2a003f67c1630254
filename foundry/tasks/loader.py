"""Load KernelBench-format task files.

A task file defines `class Model(nn.Module)`, `get_inputs()`, `get_init_inputs()` and
module-level size constants. Real KernelBench files load unchanged. Optional
module-level extensions, read without running the file (literal values only):

- ``SMALL_SIZES = {"N": 256, ...}``: smaller size constants for CPU runs (profile
  "small"); they override the module's globals before `get_inputs()` is called.
- ``SHAPE_VARIANTS = [{"N": 300}, ...]``: further overrides checked for correctness.
- ``TOLERANCES = {"atol": 1e-4, "rtol": 1e-4}``: instead of the per-dtype defaults.
- ``INSTRUCTIONS = "..."``: the task's own instructions for the kernel writer.
- ``LEVEL = 2``: 1 single op, 2 fusion, 3 block (else read from a ``levelN`` folder).
"""

from __future__ import annotations

import ast
import re
import sys
import types
from pathlib import Path
from typing import Any, Mapping

from foundry.types import Task

PROFILES = ("small", "full")
_EXTENSIONS = ("SMALL_SIZES", "SHAPE_VARIANTS", "TOLERANCES", "INSTRUCTIONS", "LEVEL")


class TaskError(ValueError):
    """A task file is missing, unreadable or not in KernelBench format."""


def _literals(tree: ast.Module, path: Path) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in _EXTENSIONS:
                try:
                    found[name] = ast.literal_eval(node.value)
                except ValueError:
                    raise TaskError(f"{path}: {name} must be a literal value") from None
    return found


def task_id_for(path: Path) -> str:
    """`level1/19_ReLU.py` -> `level1/19_ReLU`; a lone file -> its stem."""
    parent = path.parent.name
    if re.fullmatch(r"level\d+", parent):
        return f"{parent}/{path.stem}"
    return path.stem


def load_task(path: str | Path, *, profile: str = "small", task_id: str | None = None) -> Task:
    """Read a task file and return its `Task` for the size `profile` ("small" or "full").

    With profile "small" and no SMALL_SIZES in the file, the full sizes are used.
    """
    if profile not in PROFILES:
        raise TaskError(f"unknown size profile {profile!r} (choose from {', '.join(PROFILES)})")
    path = Path(path).resolve()
    try:
        source = path.read_text()
    except OSError as e:
        raise TaskError(f"cannot read task file {path}: {e.strerror or e}") from None
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as e:
        raise TaskError(f"{path}: not valid Python ({e.msg}, line {e.lineno})") from None
    names = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if n not in names]
    if missing:
        raise TaskError(f"{path}: not a KernelBench task (missing {', '.join(missing)})")
    ext = _literals(tree, path)
    overrides = dict(ext.get("SMALL_SIZES", {})) if profile == "small" else {}
    variants = tuple(dict(v) for v in ext.get("SHAPE_VARIANTS", ()))
    tol = ext.get("TOLERANCES", {})
    level = ext.get("LEVEL")
    if level is None:
        m = re.search(r"level(\d+)", str(path.parent))
        level = int(m.group(1)) if m else 0
    return Task(
        task_id=task_id or task_id_for(path), path=str(path), source=source,
        size_profile=profile, size_overrides=overrides, variants=variants,
        atol=tol.get("atol"), rtol=tol.get("rtol"),
        instructions=str(ext.get("INSTRUCTIONS", "")), level=int(level),
    )


def build_module(task: Task, overrides: Mapping[str, Any] | None = None) -> types.ModuleType:
    """Execute the task file in a fresh module and apply the size overrides
    (the profile's, then `overrides`) to its globals."""
    name = "foundry_task_" + re.sub(r"\W", "_", task.task_id)
    module = types.ModuleType(name)
    module.__file__ = task.path
    sys.modules[name] = module  # dataclasses / pickling inside the task need it
    exec(compile(task.source, task.path, "exec"), module.__dict__)
    for key, value in {**task.size_overrides, **(overrides or {})}.items():
        if key not in module.__dict__:
            raise TaskError(f"{task.task_id}: size override {key!r} names no module constant")
        module.__dict__[key] = value
    return module
