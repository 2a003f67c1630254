"""Paths and small files of a run directory.

    RUN_DIR/
      config.yaml            the resolved config of the run
      run.json               tasks, sessions, baselines (written by the driver)
      evaluations/           Parquet parts (+ a journal while a session is live)
      checkpoints/island-<i>/<task>.ckpt   island checkpoints
      best/<task>.py         the best correct kernel per task, runnable (tuned PARAMS)
      llm_calls.jsonl        one line per LLM call (model, tokens, cost, outcome)
      unfinished.jsonl       candidates still being evaluated when the run stopped
      report.md, plots/*.png the report (`python -m foundry.report RUN_DIR`)
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any


UNFINISHED_FILE = "unfinished.jsonl"


def task_file_name(task_id: str) -> str:
    """A task id as a relative file path without suffix: `level1/19_ReLU` stays a path;
    anything else unsafe becomes `_`."""
    parts = [re.sub(r"[^A-Za-z0-9_.-]", "_", p) for p in task_id.split("/") if p not in ("", ".", "..")]
    return "/".join(parts) or "task"


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name("." + path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


class RunDir:
    """A run directory (created if missing). All paths are absolute."""

    def __init__(self, path: str | Path):
        self.path = Path(path).resolve()
        self.path.mkdir(parents=True, exist_ok=True)

    @property
    def evaluations(self) -> Path:
        return self.path / "evaluations"

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    def island_checkpoint_dir(self, island_index: int) -> Path:
        return self.checkpoints / f"island-{island_index}"

    def best_file(self, task_id: str) -> Path:
        return self.path / "best" / (task_file_name(task_id) + ".py")

    @property
    def report(self) -> Path:
        return self.path / "report.md"

    @property
    def plots(self) -> Path:
        return self.path / "plots"

    @property
    def config(self) -> Path:
        return self.path / "config.yaml"

    @property
    def meta_path(self) -> Path:
        return self.path / "run.json"

    @property
    def unfinished(self) -> Path:
        return self.path / UNFINISHED_FILE

    @property
    def llm_calls(self) -> Path:
        return self.path / "llm_calls.jsonl"

    def read_meta(self) -> dict[str, Any]:
        try:
            return json.loads(self.meta_path.read_text())
        except (OSError, ValueError):
            return {}

    def write_meta(self, meta: dict[str, Any]) -> None:
        write_atomic(self.meta_path, json.dumps(meta, indent=2, sort_keys=True, default=str))

    def append_llm_calls(self, calls: list[dict[str, Any]]) -> None:
        if not calls:
            return
        with open(self.llm_calls, "a", encoding="utf-8") as f:
            for c in calls:
                f.write(json.dumps(c, default=str) + "\n")

    def read_llm_calls(self) -> list[dict[str, Any]]:
        out = []
        try:
            with open(self.llm_calls, encoding="utf-8") as f:
                for line in f:
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        continue
        except OSError:
            pass
        return out
