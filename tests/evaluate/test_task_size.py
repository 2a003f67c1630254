"""TaskSize: the peak bytes of one evaluation and of one screen, as the worker and judge hold data."""

from foundry.evaluate.job_plan import TIMING_SETS
from foundry.evaluate.task_size import TaskSize, timing_sets_that_fit

GB = 10**9


def test_a_pointwise_task_at_full_size_needs_what_is_held_at_its_peak():
    size = TaskSize(input_bytes=6 * GB, output_bytes=6 * GB)
    # worker at timing: 2 timing sets' inputs and last outputs, and the output being made
    # beside them (the trials' inputs were let go); judge: 2 trial outputs, the repeat's and
    # 2 timed outputs
    assert size.evaluation_bytes(full_trials=2, timing_sets=2) == (2 * 12 + 6 + 5 * 6) * GB


def test_many_trials_peak_while_the_first_trials_inputs_are_checked():
    size = TaskSize(input_bytes=10 * GB, output_bytes=1 * GB)
    # the five trials' inputs are built before the candidate loads, and the first trial's
    # check makes its inputs again beside them and its output: that is the worker's peak
    assert size.evaluation_bytes(full_trials=5, timing_sets=2) == ((5 + 1) * 10 + 1 + 8) * GB


def test_an_output_far_larger_than_the_input_peaks_in_the_judge_at_the_references():
    size = TaskSize(input_bytes=1 * GB, output_bytes=10 * GB)
    # the worker: three inputs and an output, or two timing sets and an output being made
    # (32); after it exits, the judge's two references, one input set and a forward's
    # intermediate output (31); beside the five outputs the judge received
    assert size.evaluation_bytes(full_trials=2, timing_sets=2) == (32 + 5 * 10) * GB


def test_a_screen_holds_one_point_at_a_time_so_it_reserves_far_less_than_an_evaluation():
    size = TaskSize(input_bytes=6 * GB, output_bytes=6 * GB)
    # judge: the reference and its copy of one point's output; worker: trial 0's inputs and
    # that point's output (or, later, its one timing set and a timed output)
    assert size.screen_bytes() == (6 + 3 * 6) * GB
    assert size.screen_bytes() < size.evaluation_bytes(full_trials=2, timing_sets=3) / 2


def test_parameters_count_once_per_model_held():
    size = TaskSize(input_bytes=1 * GB, output_bytes=1 * GB, param_bytes=2 * GB)
    # an evaluation: the candidate's model and the reference's
    assert size.evaluation_bytes(full_trials=2, timing_sets=2) == (5 + 5 + 2 * 2) * GB
    # a screen keeps every setting's model until it is timed, besides the reference's
    assert size.screen_bytes(points=6) == (1 + 3 + 7 * 2) * GB


def test_the_meta_device_sizes_a_tasks_parameters(tmp_path):
    from foundry.evaluate.task_size import meta_size
    from foundry.tasks.loader import load_task
    path = tmp_path / "linear.py"
    path.write_text("import torch\nimport torch.nn as nn\nclass Model(nn.Module):\n"
                    "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(1000, 500)\n"
                    "    def forward(self, x):\n        return self.fc(x)\n"
                    "def get_inputs():\n    return [torch.randn(64, 1000)]\n"
                    "def get_init_inputs():\n    return []\n")
    size = meta_size(load_task(str(path), profile="small"))
    assert size == TaskSize(input_bytes=64 * 1000 * 4, output_bytes=64 * 500 * 4, param_bytes=(1000 * 500 + 500) * 4)


def test_the_degeneracy_check_reserves_what_it_holds_not_a_whole_evaluation():
    size = TaskSize(input_bytes=6 * GB, output_bytes=6 * GB, param_bytes=1 * GB)
    # the model, one input set, three sets' outputs and one answer; one output for the forward
    assert size.degeneracy_bytes(trials=3) == (1 + 6 + 4 * 6 + 6) * GB
    assert size.degeneracy_bytes(trials=3) < size.evaluation_bytes(full_trials=2, timing_sets=2)
    wide = TaskSize(input_bytes=20 * GB, output_bytes=1 * GB)
    # inputs dominate: the swaps hold two input sets, the first output and a swapped one
    assert wide.degeneracy_bytes(trials=3) == (2 * 20 + 2 * 1 + 1) * GB


def test_a_task_too_large_for_two_timing_sets_is_timed_on_one():
    """level1/39 (L2Norm, 32768 x 65535 float32: 8.59 GB in and out) on an 80 GB card whose
    lanes share 90% of it: with two timing sets the worker (two sets, their outputs and one
    being made) and the judge's five received outputs need 85.9 GB, so it is timed on one
    set (68.7 GB)."""
    l2norm = TaskSize(input_bytes=8_590_000_000, output_bytes=8_590_000_000)
    capacity = int(0.9 * 85.0e9)
    assert l2norm.evaluation_bytes(full_trials=2, timing_sets=2) > capacity
    assert timing_sets_that_fit(l2norm, full_trials=2, capacity_bytes=capacity) == 1
    assert l2norm.evaluation_bytes(full_trials=2, timing_sets=1) < capacity
    small = TaskSize(input_bytes=1 * GB, output_bytes=1 * GB)
    assert timing_sets_that_fit(small, full_trials=2, capacity_bytes=capacity) == 2  # one per full-size trial
    assert timing_sets_that_fit(small, full_trials=5, capacity_bytes=capacity) == TIMING_SETS
    assert timing_sets_that_fit(l2norm, full_trials=2, capacity_bytes=0) == 2  # no limit known


def test_a_candidate_job_times_the_sets_it_is_given(tmp_path):
    from foundry.evaluate.admission import admit_backend
    from foundry.evaluate.config import EvalConfig
    from foundry.evaluate.jobs import candidate_job
    from foundry.tasks.loader import load_task
    from foundry.types import Candidate
    path = tmp_path / "relu.py"
    path.write_text("import torch\nimport torch.nn as nn\nclass Model(nn.Module):\n"
                    "    def forward(self, x):\n        return torch.relu(x)\n"
                    "def get_inputs():\n    return [torch.randn(64, 100)]\n"
                    "def get_init_inputs():\n    return []\n")
    task = load_task(str(path), profile="small")
    cand = Candidate.make(task_id=task.task_id, source="class ModelNew: pass", backend="c", origin="test")
    config = EvalConfig.from_config({"trials": 5})
    backend = admit_backend(cand, device="cpu")
    three = candidate_job(task, cand, backend, config, sizes=(25600, 25600), base=1)
    one = candidate_job(task, cand, backend, config, sizes=(25600, 25600), base=1, timing_sets=1)
    assert len(three.timing.sets) == TIMING_SETS and one.timing.sets == three.timing.sets[:1]
