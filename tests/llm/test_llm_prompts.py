"""Prompt files render for every mode and backend and carry what the issue lists."""

from __future__ import annotations

import re

import pytest

from foundry.llm import templates as T
from foundry.llm.prompt_builder import build_messages, default_sections
from foundry.types import BACKENDS, Candidate, EvalResult, ProposalRequest

from llm_helpers import PARENT_SOURCE

HW = {"name": "NVIDIA H200", "sm_count": 132, "l2_mb": 60, "bandwidth_gbs": 4020.5}


def _request(task, mode, backend="c", **kw):
    parent = Candidate.make(task_id=task.task_id, source=PARENT_SOURCE, backend=backend,
                            params={"BLOCK": 256})
    stage = 5 if mode == "optimize" else 1
    result = EvalResult(
        candidate_id=parent.candidate_id, task_id=task.task_id, stage=stage,
        correct=mode == "optimize", speedup_eager=1.7 if mode == "optimize" else None,
        speedup_compile=0.9 if mode == "optimize" else None, runtime_ms=0.031,
        error="kernel.c:4:5: error: expected ';' before '}' token", flags=(),
        descriptor=(1, 0, 2),
        metrics={"dram_throughput_pct": 61.5, "achieved_occupancy_pct": 42.0,
                 "phases": {"trials": 0.6}, "lane": {"index": 1}, "worker_wall_s": 2.5,
                 "kernels": {"own_kernels": 3, "own_time_fraction": 0.97,
                             "kernel_times_us": [["relu_kernel", 21.5, 2], ["add_kernel", 3.25, 1]]},
                 "baseline_kernels": {"eager": {"kernels": 2, "launches": 2, "kernel_times_us": [
                     ["vectorized_elementwise_kernel", 40.1, 1], ["copy_kernel", 9.0, 1]]}},
                 "roofline": {"floor_ms": 0.012, "fraction": 0.3871, "bound": "memory", "achieved_gb_per_s": 1645.2,
                              "eager_fraction": 0.245, "compile_fraction": 0.301,
                              "peak_gb_per_s": 4250.0, "achieved_tflops": 0.0, "peak_tflops": 51.0,
                              "diagnosis": "memory-bound: 39% of the floor (moves 0.051 GB at 1645 GB/s of 4250; "
                                           "floor 0.012 ms, this 0.031 ms)"},
                 "hardware": {"source": "ncu", "note": "3 kernel launches profiled", "profile_s": 6.2,
                              "diagnosis": "memory-bound at 39% of the floor; DRAM 38% of peak, SM 12%; "
                                           "2 kernels where one would do"},
                 "ncu_dram_throughput_pct": 38.0, "ncu_registers_per_thread": 32.0,
                 "tuning": [{"params": {"BLOCK": 128}, "correct": True, "runtime_ms": 0.040, "stage": 5},
                            {"params": {"BLOCK": 512}, "correct": False, "runtime_ms": None, "stage": 4,
                             "error": "output differs\n  at [3, 7]"},
                            {"params": {"BLOCK": 256}, "correct": True, "runtime_ms": 0.031, "stage": 5},
                            {"params": {"BLOCK": 64}, "correct": False, "runtime_ms": None, "stage": None}],
                 "tuning_status": "screened", "tuning_parts_s": {"screen_s": 1.5, "finalists": 1}})
    insp = Candidate.make(task_id=task.task_id, source=PARENT_SOURCE + "\n# inspiration\n",
                          backend=backend)
    insp_res = EvalResult(candidate_id=insp.candidate_id, task_id=task.task_id, stage=5,
                          correct=True, speedup_eager=2.5)
    if mode == "translate":
        parent = result = None
    return ProposalRequest(task=task, backend=backend, mode=mode, parent=parent,
                           parent_result=result, inspirations=((insp, insp_res),), hardware=HW,
                           descriptor_hint="memory level 1 -> try level 2 (shared-memory tiling)",
                           **kw)


def test_every_prompt_file_loads():
    assert set(T.blocks()) >= {"task", "parent", "descriptor", "metrics", "tuning", "error",
                               "inspirations", "reply_full", "reply_any", "reply_diff"}
    for backend in BACKENDS:
        assert f"`{backend}`" in T.read(f"backends/{backend}.md")
    for name in T.variant_names():
        assert set(T.sections(f"variants/{name}.md")) == {"philosophy", "strategies",
                                                          "pitfalls", "analysis"}
    assert set(T.keyed("edit/strategies.md")) == {"improve", "specialise", "generalise",
                                                 "simplify", "elaborate"}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["translate", "optimize", "repair"])
def test_prompts_render_without_leftover_placeholders(relu_task, mode, backend):
    system, user = build_messages(_request(relu_task, mode, backend))
    for m in (system, user):
        assert not re.search(r"\$\{?[a-z_]+\}?", m["content"]), m["content"]
    assert f"Backend rules: `{backend}`" in system["content"]
    assert "## Philosophy" in system["content"] and "## Candidate file format" in system["content"]
    text = user["content"]
    assert "## Reference module (task `19_ReLU`, level 1)" in text
    assert "return torch.relu(x)" in text and "Keep float32 throughout." in text
    assert '{"N": 256}' in text and "NVIDIA H200" in text and "sm_count: 132" in text
    assert "Kernel 1 (correct, 2.50x vs eager)" in text


def test_optimize_prompt_carries_parent_results_profile_and_tuning(relu_task):
    _, user = build_messages(_request(relu_task, "optimize"))
    text = user["content"]
    assert "correct, 1.70x vs eager, 0.90x vs torch.compile, 0.031 ms" in text
    assert 'tuned PARAMS = {"BLOCK": 256}' in text and "_lib.relu(x, y, x.numel())" in text
    assert "memory: level 1 of 3 (coalesced / vectorised access)" in text
    assert "parallelism: level 2 of 3 (warp intrinsics)" in text
    assert "Hint: memory level 1 -> try level 2" in text
    assert "dram_throughput_pct: 61.5" in text and "achieved_occupancy_pct: 42" in text
    assert "diagnosis: memory-bound: 39% of the floor (moves 0.051 GB at 1645 GB/s of 4250" in text
    assert "roofline_fraction: 0.3871" in text and "roofline_peak_gb_per_s: 4250" in text
    assert text.index("diagnosis: memory-bound") < text.index("dram_throughput_pct")  # the diagnosis first
    assert "kernels_launched: 3 launches of 2 kernels" in text and "kernel_1: relu_kernel: 21.5 us over 2 launch(es)" in text
    assert "kernels_own_time: 97% of device time in the candidate's own kernels" in text
    # the baselines against the same floor
    assert ("baseline_eager: 24% of the floor; 2 launches of 2 kernels, the slowest vectorized_elementwise_kernel "
            "(40 us)") in text and "baseline_torch_compile: 30% of the floor" in text
    # the elite's hardware profile: its diagnosis, its source and its counters
    assert "hardware_diagnosis: memory-bound at 39% of the floor; DRAM 38% of peak, SM 12%; 2 kernels where one" in text
    assert "hardware_source: ncu" in text and "ncu_dram_throughput_pct: 38" in text
    assert "ncu_registers_per_thread: 32" in text and "profile_s" not in text
    # the judge's bookkeeping stays out of the prompt
    assert "phases" not in text and "worker_wall_s" not in text and "lane" not in text.lower().replace("plane", "")
    # tuning: one setting a line, the fastest first, then the failed; no bookkeeping
    assert '- {"BLOCK": 256}: 0.031 ms\n- {"BLOCK": 128}: 0.04 ms\n- {"BLOCK": 512}: failed (value): output differs at [3, 7]\n- {"BLOCK": 64}: failed (?)' in text
    assert "tuning_parts_s" not in text and "screen_s" not in text and "tuning_status" not in text
    assert "<<<<<<< SEARCH" in text and "What went wrong" not in text


def test_repair_prompt_carries_the_error(relu_task):
    _, user = build_messages(_request(relu_task, "repair"))
    text = user["content"]
    assert "The parent reached stage `compile`" in text
    assert "expected ';' before '}' token" in text
    assert "failed at stage compile" in text


def test_translate_prompt_has_no_parent_and_full_file_format(relu_task):
    _, user = build_messages(_request(relu_task, "translate"))
    text = user["content"]
    assert "Parent kernel" not in text and "SEARCH" not in text
    assert "complete new file in one ```python fenced block" in text


def test_evolved_sections_replace_the_default(relu_task):
    sections = {**default_sections(), "pitfalls": "UNIQUE-PITFALL-MARKER"}
    system, _ = build_messages(_request(relu_task, "optimize", prompt_sections=sections))
    assert "UNIQUE-PITFALL-MARKER" in system["content"]
    assert "Off-by-one" not in system["content"]


def test_reply_format_config(relu_task):
    _, full = build_messages(_request(relu_task, "optimize"), reply_format="full")
    _, diff = build_messages(_request(relu_task, "optimize"), reply_format="diff")
    assert "SEARCH" not in full["content"]
    assert "your changes to the parent as SEARCH/REPLACE blocks" in diff["content"]


def test_long_error_is_clipped(relu_task):
    req = _request(relu_task, "repair")
    long = req.parent_result.__class__(**{**req.parent_result.__dict__, "error": "E" * 50_000})
    _, user = build_messages(req.__class__(**{**req.__dict__, "parent_result": long}))
    assert len(user["content"]) < 20_000 and "characters cut" in user["content"]


def test_unknown_mode_is_rejected(relu_task):
    with pytest.raises(ValueError, match="unknown proposal mode 'mutate'"):
        build_messages(ProposalRequest(task=relu_task, backend="c", mode="mutate"))


def test_a_prompt_built_from_a_result_read_back_from_the_log_carries_its_metrics(relu_task, tmp_path):
    """The parent as the islands get it after a restart: written to the evaluation log
    (Parquet) and read back; its prompt still has the profile, the diagnosis, the device."""
    import dataclasses

    from foundry.store import EvaluationLog, read_evaluations
    request = _request(relu_task, "optimize")
    log = EvaluationLog(tmp_path)
    log.append(request.parent, request.parent_result)
    log.close()
    (stored,) = read_evaluations(tmp_path)
    assert stored.result.metrics["hardware"]["source"] == "ncu"
    _, user = build_messages(dataclasses.replace(request, parent=stored.candidate, parent_result=stored.result))
    text = user["content"]
    assert "## Hardware" in text and "- sm_count: 132" in text
    assert "diagnosis: memory-bound: 39% of the floor" in text
    assert "hardware_diagnosis: memory-bound at 39% of the floor; DRAM 38% of peak" in text
    assert "ncu_dram_throughput_pct: 38" in text and "kernel_1: relu_kernel: 21.5 us" in text
    assert '- {"BLOCK": 256}: 0.031 ms' in text
