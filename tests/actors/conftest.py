from __future__ import annotations

from pathlib import Path

import pytest

from foundry.tasks import load_task

ROOT = Path(__file__).resolve().parents[2]
TASK_FILE = ROOT / "benchmarks" / "suite" / "level1" / "08_ReLU.py"


@pytest.fixture
def relu_task():
    return load_task(TASK_FILE, profile="small")
