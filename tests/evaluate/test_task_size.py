"""TaskSize: the peak bytes of one evaluation and of one screen, as the worker and judge hold data."""

from foundry.evaluate.task_size import TaskSize

GB = 10**9


def test_a_pointwise_task_at_full_size_needs_what_is_held_at_its_peak():
    size = TaskSize(input_bytes=6 * GB, output_bytes=6 * GB)
    # worker at timing: 2 timing sets' inputs and timed outputs (the trials' inputs were let go);
    # judge: 2 trial outputs, the repeat's and 2 timed outputs
    assert size.evaluation_bytes(full_trials=2, timing_sets=2) == (2 * 12 + 5 * 6) * GB


def test_many_trials_peak_while_every_trial_input_is_built():
    size = TaskSize(input_bytes=10 * GB, output_bytes=1 * GB)
    # the five trials' inputs are built before the candidate loads: that is the worker's peak
    assert size.evaluation_bytes(full_trials=5, timing_sets=2) == (5 * 10 + 1 + 8) * GB


def test_a_screen_holds_one_point_at_a_time_so_it_reserves_far_less_than_an_evaluation():
    size = TaskSize(input_bytes=6 * GB, output_bytes=6 * GB)
    # judge: the reference and its copy of one point's output; worker: trial 0's inputs and
    # that point's output (or, later, its one timing set and a timed output)
    assert size.screen_bytes() == (6 + 3 * 6) * GB
    assert size.screen_bytes() < size.evaluation_bytes(full_trials=2, timing_sets=3) / 2
