"""On a GPU: the Triton seed captured there (Inductor's kernels, the configs its
autotuner picked) is judged correct on CUDA with no guard flag. Skipped without a GPU."""

from __future__ import annotations

import pytest

from tests.seeds.conftest import ROOT

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

TASKS = [ROOT / "benchmarks" / "suite" / "level1" / "33_RMSNorm.py",
         ROOT / "benchmarks" / "suite" / "level2" / "23_Conv2d_ReLU_BiasAdd.py",
         # a plain matmul: Inductor's default mode leaves it to the library; its Triton template
         ROOT / "benchmarks" / "suite" / "level1" / "01_Square_matmul.py"]


@pytest.mark.parametrize("path", TASKS, ids=[p.stem for p in TASKS])
def test_triton_seed_is_correct_on_cuda(path):
    from foundry.evaluate import EvalConfig, Evaluator
    from foundry.seeds import inductor_seed
    from foundry.tasks import load_task
    from foundry.types import Candidate, Stage

    task = load_task(path, profile="small")
    seed = inductor_seed(task, device="cuda")
    assert seed.ok and seed.backend == "triton", seed.note
    assert "triton_heuristics" not in seed.source and ".run(" not in seed.source
    if "matmul" in path.stem:
        assert "GEMM templates" in seed.note and seed.kernels >= 1
    cfg = EvalConfig.from_config({"device": "cuda", "trials": 3, "timeout_s": 60, "compile_baseline": True})
    with Evaluator(config=cfg) as ev:
        r = ev.evaluate(task=task, candidate=Candidate.make(task_id=task.task_id, source=seed.source,
                                                            backend="triton", origin="seed"))
    assert r.correct, f"stage {Stage(r.stage).label}, flags {r.flags}: {r.error[:600]}"
    assert r.flags == () and r.speedup_compile is not None


def test_a_lone_convolution_gets_no_max_autotune_seed_on_cuda():
    from foundry.seeds import inductor_seed
    from foundry.tasks import load_task

    task = load_task(ROOT / "benchmarks" / "suite" / "level1" / "51_Conv2d.py", profile="small")
    seed = inductor_seed(task, device="cuda")
    assert not seed.ok and "convolution templates cover it" in seed.note, seed.note
