"""TaskSize: the peak bytes of one evaluation and of one screen, as the worker and judge hold data."""

from foundry.evaluate.task_size import TaskSize

GB = 10**9


def test_a_pointwise_task_at_full_size_needs_what_is_held_at_its_peak():
    size = TaskSize(input_bytes=6 * GB, output_bytes=6 * GB)
    # worker at timing: 2 timing sets' inputs and timed outputs (the trials' inputs were let go);
    # judge: 2 trial outputs, the repeat's and 2 timed outputs
    assert size.evaluation_bytes(full_trials=2, timing_sets=2) == (2 * 12 + 5 * 6) * GB


def test_many_trials_peak_while_the_first_trials_inputs_are_checked():
    size = TaskSize(input_bytes=10 * GB, output_bytes=1 * GB)
    # the five trials' inputs are built before the candidate loads, and the first trial's
    # check makes its inputs again beside them and its output: that is the worker's peak
    assert size.evaluation_bytes(full_trials=5, timing_sets=2) == ((5 + 1) * 10 + 1 + 8) * GB


def test_an_output_far_larger_than_the_input_peaks_in_the_judge_at_the_references():
    size = TaskSize(input_bytes=1 * GB, output_bytes=10 * GB)
    # the worker: three inputs and an output (or two timing sets: 22); after it exits, the
    # judge's two references, one input set and a forward's intermediate output (31), beside
    # the five outputs it received
    assert size.evaluation_bytes(full_trials=2, timing_sets=2) == (31 + 5 * 10) * GB


def test_a_screen_holds_one_point_at_a_time_so_it_reserves_far_less_than_an_evaluation():
    size = TaskSize(input_bytes=6 * GB, output_bytes=6 * GB)
    # judge: the reference and its copy of one point's output; worker: trial 0's inputs and
    # that point's output (or, later, its one timing set and a timed output)
    assert size.screen_bytes() == (6 + 3 * 6) * GB
    assert size.screen_bytes() < size.evaluation_bytes(full_trials=2, timing_sets=3) / 2


def test_parameters_count_once_per_model_held():
    size = TaskSize(input_bytes=1 * GB, output_bytes=1 * GB, param_bytes=2 * GB)
    # an evaluation: the candidate's model and the reference's
    assert size.evaluation_bytes(full_trials=2, timing_sets=2) == (4 + 5 + 2 * 2) * GB
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
