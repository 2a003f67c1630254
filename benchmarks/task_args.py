"""The task-selection arguments the benchmark scripts share, and the tasks they select:
`--path` (a suite, a KernelBench checkout or a task folder; the project's suite by
default), `--level` (level folders; all by default), `--only` (keep the tasks whose id
contains any of these substrings) and, where the script lets the user choose, `--profile`
(the size profile the tasks load at)."""

from __future__ import annotations

import argparse


def add_task_arguments(ap: argparse.ArgumentParser, *, profile: str | None = "full") -> None:
    """Add the shared arguments to `ap`; `profile` is --profile's default (None: no
    --profile, the script loads at a profile of its own)."""
    ap.add_argument("--path", default=None,
                    help="a suite, a KernelBench checkout or a folder of task files (default: the project suite)")
    ap.add_argument("--level", type=int, nargs="*", default=None, help="level folders (default: all)")
    ap.add_argument("--only", nargs="+", default=[], help="keep tasks whose id contains any of these substrings")
    if profile is not None:
        ap.add_argument("--profile", default=profile, choices=("small", "full", "auto"),
                        help=f"the tasks' size profile (default: {profile})")


def selected_tasks(args: argparse.Namespace, *, profile: str | None = None) -> list:
    """The tasks `args` select, loaded at `profile` (default: the --profile argument)."""
    from foundry.tasks.suite import load_suite
    tasks = load_suite(path=args.path, level=args.level, profile=profile or args.profile)
    return [t for t in tasks if not args.only or any(s in t.task_id for s in args.only)]
