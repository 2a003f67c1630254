from __future__ import annotations

import json
from pathlib import Path

import pytest

from foundry.evaluate import EvalConfig, Evaluator

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def seed_judge(tmp_path_factory):
    """The real judge on the CPU, small sizes, no torch.compile baseline (speed is not
    what these tests check)."""
    cfg = EvalConfig.from_config({
        "trials": 3, "timeout_s": 120, "memory_mb": 2048, "compile_baseline": False, "timing_min_ms": 40,
        "baseline_cache_dir": str(tmp_path_factory.mktemp("seed-baselines"))})
    ev = Evaluator(config=cfg)
    yield ev
    ev.close()


def h200_sample(name: str) -> tuple[str, dict]:
    """(output code, chosen configs) of one H200 sample in data/ (see data/README.md)."""
    return (DATA / f"{name}.py.txt").read_text(), json.loads((DATA / f"{name}.configs.json").read_text())
