"""Load many tasks at once: the project's suite, a KernelBench checkout, a user's files.

`load_suite(path=..., level=..., ids=..., profile=...)` accepts:
- nothing: the project's own suite, `benchmarks/suite/level{1,2,3}/` in the source tree;
- a folder with `level1/`, `level2/`, ... subfolders (our suite, or a checkout's
  `KernelBench/` folder), or a KernelBench checkout root (holding `KernelBench/levelN`);
- a user's folder of task files (every `*.py` defining `Model`, `get_inputs` and
  `get_init_inputs`; other `.py` files are skipped), optionally with an `INSTRUCTIONS.md`
  / `INSTRUCTIONS.txt` / `INSTRUCTIONS` file for the kernel writer, applied to every task
  in it (before a task's own `INSTRUCTIONS`);
- a single task file.

`ids` select files by their numeric prefix (`19_ReLU.py` is id 19) within the chosen
level(s). Task ids are `levelN/<stem>` inside level folders, else the file's stem.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from foundry.config_keys import checked_keys
from foundry.tasks.loader import PROFILES, TaskError, load_task
from foundry.types import Task

PROFILE_CHOICES = ("auto",) + PROFILES
INSTRUCTION_FILES = ("INSTRUCTIONS.md", "INSTRUCTIONS.txt", "INSTRUCTIONS")
_LEVEL_DIR = re.compile(r"level(\d+)")
_ID_PREFIX = re.compile(r"(\d+)_")


def default_suite_path() -> Path:
    """The project's own suite (`benchmarks/suite` next to the `foundry` package)."""
    return Path(__file__).resolve().parents[2] / "benchmarks" / "suite"


def resolve_profile(profile: str, *, device: str | None = None) -> str:
    """"auto" -> "full" on a CUDA device (or, with no device given, when CUDA is
    available), else "small". "small"/"full" pass through."""
    if profile not in PROFILE_CHOICES:
        raise TaskError(f"unknown size profile {profile!r} (choose from {', '.join(PROFILE_CHOICES)})")
    if profile != "auto":
        return profile
    if device is None:
        import torch
        return "full" if torch.cuda.is_available() else "small"
    return "full" if str(device).startswith("cuda") else "small"


def task_number(path: Path) -> int | None:
    """`19_ReLU.py` -> 19; None without a numeric prefix."""
    m = _ID_PREFIX.match(path.name)
    return int(m.group(1)) if m else None


def _levels_root(path: Path) -> Path | None:
    """The folder holding `levelN/` subfolders, if `path` is (or contains) one."""
    for root in (path, path / "KernelBench"):
        if root.is_dir() and any(p.is_dir() and _LEVEL_DIR.fullmatch(p.name) for p in root.iterdir()):
            return root
    return None


def _sorted(files: Iterable[Path]) -> list[Path]:
    def key(p: Path):
        n = task_number(p)
        return (n is None, n if n is not None else 0, p.name)
    return sorted(files, key=key)


def _py_files(folder: Path) -> list[Path]:
    return _sorted(p for p in folder.glob("*.py") if p.is_file() and not p.name.startswith("_"))


def _select_ids(files: list[Path], ids: Sequence[int] | None, where: Path) -> list[Path]:
    if ids is None:
        return files
    wanted = [int(i) for i in ids]
    by_id: dict[int, Path] = {}
    for f in files:
        n = task_number(f)
        if n is not None:
            by_id.setdefault(n, f)
    missing = [i for i in wanted if i not in by_id]
    if missing:
        have = sorted(by_id)
        span = f"{have[0]}..{have[-1]}" if have else "none"
        raise TaskError(f"no task with id {', '.join(map(str, missing))} in {where} (ids there: {span})")
    return [by_id[i] for i in dict.fromkeys(wanted)]


def _levels(levels_root: Path, level: int | Sequence[int] | None) -> list[tuple[int, Path]]:
    present = {int(m.group(1)): p for p in levels_root.iterdir()
               if p.is_dir() and (m := _LEVEL_DIR.fullmatch(p.name))}
    if level is None:
        return sorted(present.items())
    wanted = [int(level)] if isinstance(level, (int, str)) else [int(x) for x in level]
    bad = [lv for lv in wanted if lv not in present]
    if bad:
        raise TaskError(f"no level {', '.join(map(str, bad))} in {levels_root} "
                        f"(levels there: {', '.join(map(str, sorted(present))) or 'none'})")
    return [(lv, present[lv]) for lv in wanted]


def _folder_instructions(folder: Path) -> str:
    for name in INSTRUCTION_FILES:
        f = folder / name
        if f.is_file():
            return f.read_text().strip()
    return ""


def _with_instructions(task: Task, extra: str) -> Task:
    if not extra:
        return task
    text = extra if not task.instructions else f"{extra}\n\n{task.instructions}"
    return dataclasses.replace(task, instructions=text)


def _is_task_file(path: Path) -> bool:
    text = path.read_text(errors="replace")
    return all(re.search(rf"^(class|def) {name}\b", text, re.M) for name in ("Model", "get_inputs", "get_init_inputs"))


def load_suite(*, path: str | Path | None = None, level: int | Sequence[int] | None = None,
               ids: Sequence[int] | None = None, profile: str = "small",
               limit: int | None = None) -> list[Task]:
    """Load tasks (see the module docstring for what `path` may be). `level` picks level
    folders (all when None); `ids` numeric prefixes (needs one level where there are
    several); `profile` "small" | "full" | "auto" (see `resolve_profile`); `limit` keeps
    the first N after sorting by level and id."""
    profile = resolve_profile(profile)
    if limit is not None and int(limit) < 1:
        raise TaskError(f"limit must be a positive number of tasks, got {limit}")
    if path is None:
        root = default_suite_path()
        if not root.is_dir():
            raise TaskError(f"the project's task suite was not found at {root} (it ships with the "
                            "source tree, not the installed package); pass a path to a suite, "
                            "a KernelBench checkout or a task folder")
    else:
        root = Path(path).expanduser().resolve()
        if not root.exists():
            raise TaskError(f"task path {root} does not exist")

    tasks: list[Task]
    if root.is_file():
        if ids is not None and task_number(root) not in [int(i) for i in ids]:
            raise TaskError(f"task file {root} does not have one of the ids {list(ids)}")
        tasks = [_with_instructions(load_task(root, profile=profile), _folder_instructions(root.parent))]
    elif (levels_root := _levels_root(root)) is not None:
        chosen = _levels(levels_root, level)
        if ids is not None and len(chosen) > 1:
            raise TaskError(f"ids select within one level; {levels_root} has levels "
                            f"{', '.join(str(lv) for lv, _ in chosen)}: give a level too")
        tasks = []
        for _lv, folder in chosen:
            files = _select_ids(_py_files(folder), ids, folder)
            extra = _folder_instructions(folder) or _folder_instructions(levels_root)
            tasks += [_with_instructions(load_task(f, profile=profile), extra) for f in files]
    else:
        if level is not None:
            raise TaskError(f"{root} has no level folders (level{level}/); drop the level or point at a suite")
        files = _select_ids([f for f in _py_files(root) if _is_task_file(f)], ids, root)
        if not files:
            raise TaskError(f"no KernelBench-format task files (with Model, get_inputs, get_init_inputs) in {root}")
        extra = _folder_instructions(root)
        tasks = [_with_instructions(load_task(f, profile=profile), extra) for f in files]
    if not tasks:
        raise TaskError(f"no tasks found under {root}")
    return tasks[: int(limit)] if limit is not None else tasks


@dataclass(frozen=True)
class SuiteConfig:
    """The `tasks` config group: which tasks a run optimises.

    path: None (the project's suite), a suite / KernelBench checkout / folder / file.
    level: None (all) or a level number or list of them. ids: None (all) or numeric
    prefixes within the level. profile: auto | small | full. limit: None or first N.
    """

    path: str | None = None
    level: int | tuple | None = None
    ids: tuple | None = None
    profile: str = "auto"
    limit: int | None = None

    @classmethod
    def from_config(cls, mapping: Mapping[str, Any]) -> "SuiteConfig":
        values = checked_keys(cls, mapping, group="tasks")
        level = values.get("level")
        if level is not None and not isinstance(level, int):
            level = tuple(int(x) for x in level)
        ids = values.get("ids")
        if ids is not None:
            ids = (int(ids),) if isinstance(ids, (int, str)) else tuple(int(i) for i in ids)
        profile = str(values.get("profile", "auto"))
        if profile not in PROFILE_CHOICES:
            raise TaskError(f"tasks.profile must be one of {', '.join(PROFILE_CHOICES)}, got {profile!r}")
        limit = values.get("limit")
        path = values.get("path")
        if path == "???":
            raise TaskError("tasks.path is required here: give tasks.path=<KernelBench checkout or task folder>")
        return cls(path=None if path in (None, "") else str(path), level=level, ids=ids,
                   profile=profile, limit=None if limit is None else int(limit))

    def load(self, *, device: str | None = None) -> list[Task]:
        """Load the configured tasks; "auto" resolves against `device` ("cuda..." -> full)."""
        return load_suite(path=self.path, level=self.level, ids=self.ids,
                          profile=resolve_profile(self.profile, device=device), limit=self.limit)
