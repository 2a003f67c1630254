"""What the GPU tests share: the ReLU task they judge and the judge's config for them."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RELU_TASK = ROOT / "benchmarks" / "suite" / "level1" / "08_ReLU.py"


def gpu_eval_config(**overrides):
    """The judge's config for GPU tests (FOUNDRY_GPU_ISOLATION overrides isolation)."""
    import os

    from foundry.evaluate.config import EvalConfig
    base = dict(device="cuda", trials=3, timeout_s=20.0, compile_baseline=False,
                timing_min_ms=50.0, timing_min_calls=10, warmup_ms=10.0,
                isolation=os.environ.get("FOUNDRY_GPU_ISOLATION", "auto"))
    base.update(overrides)
    return EvalConfig.from_config(base)
