"""An evaluator actor's work without Ray: plain evaluation, or tuning a TUNABLE space."""

from __future__ import annotations

from actors.evaluation import EvaluationService, tuner_config
from actors.standins import FixedCostEvaluator, copy_candidate_source
from actors.twins import TUNING_DEFERRED
from foundry.types import Candidate


def test_tunable_candidates_are_tuned_with_the_evaluator(relu_task):
    src = copy_candidate_source(relu_task, 7)
    cand = Candidate.make(task_id=relu_task.task_id, source=src, backend="c", parent_ids=("p",))
    svc = EvaluationService(evaluator=FixedCostEvaluator(), device="cpu",
                            tuning=tuner_config({"tune_budget": 8, "tune_exhaustive_max": 8, "tune_uncovered": True}))
    tuned, result = svc.run(relu_task, cand)
    assert svc.measurements >= 3  # UNROLL in [1, 2, 4]: every point measured (+ the best again)
    assert tuned.params.get("UNROLL") in (1, 2, 4) and tuned.parent_ids == ("p",)
    assert result.candidate_id == tuned.candidate_id
    records = result.metrics["tuning"]
    assert len(records) == 3
    fastest = min(records, key=lambda r: r["runtime_ms"])
    assert tuned.params == fastest["params"]


def test_without_tuning_or_tunable_one_evaluation(relu_task):
    cand = Candidate.make(task_id=relu_task.task_id, source="# no space", backend="c")
    svc = EvaluationService(evaluator=FixedCostEvaluator(), device="cpu", tuning=tuner_config({}))
    out, result = svc.run(relu_task, cand)
    assert out == cand and svc.measurements == 1 and result.candidate_id == cand.candidate_id
    svc = EvaluationService(evaluator=FixedCostEvaluator(), device="cpu", tuning=None)
    src = copy_candidate_source(relu_task, 1)
    cand = Candidate.make(task_id=relu_task.task_id, source=src, backend="c")
    assert svc.run(relu_task, cand)[0] == cand and svc.measurements == 1


def test_when_no_setting_is_correct_the_pair_stays_matched(relu_task):
    class Wrong(FixedCostEvaluator):
        def evaluate(self, *, task, candidate):
            import dataclasses
            r = super().evaluate(task=task, candidate=candidate)
            return dataclasses.replace(r, correct=False, stage=4, speedup_eager=None)
    src = copy_candidate_source(relu_task, 3)
    cand = Candidate.make(task_id=relu_task.task_id, source=src, backend="c")
    svc = EvaluationService(evaluator=Wrong(), device="cpu",
                            tuning=tuner_config({"tune_budget": 3, "tune_uncovered": True}))
    out, result = svc.run(relu_task, cand)
    assert result.candidate_id == out.candidate_id and not result.correct


def test_a_tuned_result_carries_the_other_measurements_as_its_tuning_phase(relu_task):
    import dataclasses

    class Phased(FixedCostEvaluator):
        def evaluate(self, *, task, candidate):
            r = super().evaluate(task=task, candidate=candidate)
            return dataclasses.replace(r, eval_s=0.01, metrics={"phases": {"build": 0.004, "trials": 0.006}})

    src = copy_candidate_source(relu_task, 2)
    cand = Candidate.make(task_id=relu_task.task_id, source=src, backend="c")
    svc = EvaluationService(evaluator=Phased(config={"cost_s": 0.01}), device="cpu",
                            tuning=tuner_config({"tune_budget": 3, "tune_exhaustive_max": 3, "tune_uncovered": True}))
    _, result = svc.run(relu_task, cand)
    phases = result.metrics["phases"]
    assert phases["build"] == 0.004 and phases["trials"] == 0.006  # the returned measurement's own
    assert svc.measurements == 3 and 0.015 <= phases["tuning"] < 1.0  # the two other settings
    untuned = EvaluationService(evaluator=Phased(), device="cpu", tuning=None).run(relu_task, cand)[1]
    assert "tuning" not in untuned.metrics["phases"]


def test_with_the_devices_ceilings_each_correct_result_gets_its_roofline_position(relu_task, tmp_path):
    from foundry.tasks.roofline import DeviceCeilings, roofline_for_task
    from foundry.tasks.suite import load_suite
    ceilings = DeviceCeilings(bandwidth_bytes_per_s=1e11, flops_per_s=1e12, source="test")
    svc = EvaluationService(evaluator=FixedCostEvaluator(), device="cuda", tuning=None, ceilings=ceilings)
    cand = Candidate.make(task_id=relu_task.task_id, source="# plain", backend="c")
    _, result = svc.run(relu_task, cand)
    floor = roofline_for_task(relu_task, ceilings=ceilings).floor_ms
    pos = result.metrics["roofline"]
    assert pos["bound"] == "memory" and pos["floor_ms"] == round(floor, 6)
    assert abs(pos["fraction"] - floor / result.runtime_ms) < 1e-3 and "of the floor" in pos["diagnosis"]
    # the baselines against the same floor
    assert pos["eager_fraction"] == round(floor / result.eager_ms, 4)
    assert pos["compile_fraction"] == round(floor / result.compile_ms, 4)
    # a reference that does not run on the meta device gets a note, never a CPU run at full size
    path = tmp_path / "nonzero_task.py"
    path.write_text("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n"
                    "    def forward(self, x):\n        return x[x > 0].sum().reshape(1)\n\n"
                    "def get_inputs():\n    return [torch.randn(8, 8)]\n\ndef get_init_inputs():\n    return []\n")
    (odd,) = load_suite(path=path, profile="full")
    _, result = svc.run(odd, Candidate.make(task_id=odd.task_id, source="# plain", backend="c"))
    assert "roofline" not in result.metrics and "meta device" in result.metrics["roofline_note"]
    # without ceilings (a CPU evaluator) nothing is added
    _, plain = EvaluationService(evaluator=FixedCostEvaluator(), device="cpu", tuning=None).run(relu_task, cand)
    assert "roofline" not in plain.metrics and "roofline_note" not in plain.metrics


def test_with_tuning_waiting_for_coverage_a_tasks_first_candidate_is_judged_once(relu_task):
    """tune_uncovered false: until a lane of the evaluator has judged a correct kernel for
    the task, a TUNABLE candidate is measured once at its own settings; the lanes share
    what is covered, and from then on candidates are tuned."""
    tuning = tuner_config({"tune_budget": 8, "tune_exhaustive_max": 8, "tune_uncovered": False})
    covered: set = set()
    first, second = (EvaluationService(evaluator=FixedCostEvaluator(), device="cpu", tuning=tuning, covered=covered)
                     for _ in range(2))
    cand = Candidate.make(task_id=relu_task.task_id, source=copy_candidate_source(relu_task, 5), backend="c",
                          params={"UNROLL": 2})
    out, result = first.run(relu_task, cand)
    assert first.measurements == 1 and out == cand and "tuning" not in (result.metrics or {})
    assert result.correct and covered == {relu_task.task_id}
    assert result.metrics[TUNING_DEFERRED] is True  # judged untuned: the same code may be tuned later
    other = Candidate.make(task_id=relu_task.task_id, source=copy_candidate_source(relu_task, 6), backend="c")
    _, tuned = second.run(relu_task, other)
    assert second.measurements >= 3 and len(tuned.metrics["tuning"]) == 3  # the other lane tunes now
    assert TUNING_DEFERRED not in tuned.metrics


def test_while_the_run_waits_for_every_tasks_first_verdict_a_covered_tasks_candidate_is_judged_untuned(relu_task):
    """`tune` False (the dispatcher's breadth-first wait): judged once at its own settings,
    even with the task covered and tuning from the start, and the verdict says why."""
    from actors.twins import BREADTH
    svc = EvaluationService(evaluator=FixedCostEvaluator(), device="cpu", covered={relu_task.task_id},
                            tuning=tuner_config({"tune_budget": 8, "tune_exhaustive_max": 8, "tune_uncovered": True}))
    cand = Candidate.make(task_id=relu_task.task_id, source=copy_candidate_source(relu_task, 5), backend="c")
    out, result = svc.run(relu_task, cand, tune=False)
    assert svc.measurements == 1 and out == cand and result.metrics[TUNING_DEFERRED] == BREADTH
    _, tuned = svc.run(relu_task, cand)
    assert len(tuned.metrics["tuning"]) == 3 and TUNING_DEFERRED not in tuned.metrics
