"""A KernelBench-style load_inline candidate, prebuilt by the build pool, is judged
unchanged on the GPU (its kernel found by the profiler, as it records no launches)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu


def _why(res) -> str:
    return f"stage={res.stage} flags={res.flags} error={res.error[:400]!r}"


def test_honest_cuda_inline_candidate_passes(judge):
    import gpu_candidates as gc

    from foundry.kernels import cuda_inline
    src = gc.candidate("08_ReLU", "cuda_inline")
    built = cuda_inline.build_now(source=src, timeout_s=400)  # the build pool's job
    assert built.ok, built.log
    res = judge(src, "cuda_inline")
    assert res.correct, _why(res)
    assert res.metrics.get("worker_wall_s", 0) < 20  # a cached build: no compile in the worker
