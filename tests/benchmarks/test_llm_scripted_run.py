"""The scripted kernel writer of benchmarks/llm_scripted_run.py: it finds the task the
prompt names, answers with real template kernels of every kind in turn, and always
answers a repair prompt with a correct kernel."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.benchmark_script import load_benchmark

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("llm_scripted_run")


def _prompt(task, extra: str = "") -> dict:
    return {"messages": [{"role": "user", "content": f"## Reference module (task `{task.task_id}`, level 1)\n\n"
                                                     f"{task.source}\n{extra}"}]}


def test_every_kind_in_turn_and_repairs_get_a_correct_kernel(bench):
    from foundry.tasks.loader import load_task
    task = load_task(ROOT / "benchmarks" / "suite" / "level1" / "08_ReLU.py", profile="small")
    writer = bench.ScriptedKernelWriter([task], backend="c")
    parent_params = "PARAMS = {'BLOCK': 1}"
    replies = [writer(_prompt(task, parent_params)) for _ in bench.KINDS]
    assert [r.status for r in replies].count(500) == 1 and [r.status for r in replies].count(429) == 1
    assert sum(r.delay_s > bench.CLIENT_TIMEOUT_S for r in replies) == 1
    files = [r.content for r in replies if r.status == 200 and "```python" in (r.content or "")]
    assert any("def forward(self,, " in f for f in files)  # the broken one
    assert any("* 1.01" in f for f in files)  # the wrong one
    assert any("<<<<<<< SEARCH\n" + parent_params in (r.content or "") for r in replies)  # the edit
    repair = writer(_prompt(task, "The parent reached stage `compile`"))
    assert repair.status == 200 and "def forward(self,, " not in repair.content and "* 1.01" not in repair.content
    assert writer.sent["repair"] == 1 and sum(writer.sent.values()) == len(bench.KINDS) + 1
    other = writer({"messages": [{"role": "user", "content": "Rewrite this section of the prompt."}]})
    assert other.status == 200 and writer.sent["not a kernel request"] == 1


def test_migrants_are_counted_from_the_islands_checkpoints(bench, tmp_path):
    import dataclasses

    from foundry.store.rundir import RunDir
    from foundry.types import Candidate, EvalResult
    from islands import Island
    corpus = sorted((ROOT / "tests" / "islands" / "corpus").glob("triton*.py"))[:4]
    task = "level1/19_ReLU"
    islands = [Island(island_id=i, task_id=task, seed=i) for i in (0, 1)]
    for k, path in enumerate(corpus):
        home = islands[k % 2]
        cand = dataclasses.replace(Candidate.make(task_id=task, source=path.read_text(), backend="triton"),
                                   island_id=home.island_id)
        home.add(candidate=cand, result=EvalResult(candidate_id=cand.candidate_id, task_id=task, stage=5,
                                                   correct=True, speedup_eager=1.0 + k))
    islands[0].immigrate(elites=islands[1].emigrants())
    migrants = sum(1 for e in islands[0].archive.elites() if e.is_migrant)
    assert migrants >= 1
    for island in islands:
        island.save(str(RunDir(tmp_path).island_checkpoint_dir(island.island_id) / "level1" / "19_ReLU.ckpt"))
    assert bench.migrants_held(tmp_path) == migrants
    assert bench.migrants_held(tmp_path / "empty") == 0
