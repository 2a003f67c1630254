"""Two KernelBench problems whose heavy-tailed trial refused every kernel on an H100, at
fewer rows than published (the rows' length as published), judged with their Triton
template: level1/90 (cumprod over rows of 32768: a tree of float32 partial products
overflowed where the product in order stays finite) and level1/97 (scaled dot-product
attention with a head width of 1024: near-tied scores). Each should pass now, on its
trials against the float32 reference or, for a heavy-tailed one, against the model
computed in float64 (verdict.check_trials)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

KERNELBENCH = Path(__file__).resolve().parents[3] / "shared" / "kernelbench" / "level1"
SMALLER = {"90_cumprod.py": {"batch_size": 256}, "97_ScaledDotProductAttention.py": {"batch_size": 2}}


@pytest.mark.parametrize("name", sorted(SMALLER))
def test_a_heavy_tailed_problem_gets_a_correct_template_kernel(judge, tmp_path, name):
    from foundry.tasks.loader import load_task
    from foundry.templates.engine import emit
    source = KERNELBENCH / name
    if not source.is_file():
        pytest.skip(f"{source} is not here")
    text = source.read_text()
    for var, value in SMALLER[name].items():
        text = re.sub(rf"^{var} = .*$", f"{var} = {value}", text, count=1, flags=re.M)
    path = tmp_path / name
    path.write_text(text)
    kernel = emit(load_task(path), backend="triton")
    result = judge(kernel, "triton", task_path=path, profile="full")
    assert result.correct, result.error
    print(name, "float64 reference trials:", result.metrics.get("float64_reference_trials"),
          "speedup over eager", result.speedup_eager)
