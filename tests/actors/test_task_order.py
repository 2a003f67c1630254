"""The choice of an island's next task: breadth first, then by headroom (actors.task_order)."""

from __future__ import annotations

from actors.task_order import F32_COMPUTE_REACH, FIRST_KERNEL_STEPS, MIN_HEADROOM, TaskStanding, floor_fraction, next_task


def test_a_task_without_a_correct_kernel_goes_before_covered_ones_served_less():
    standings = {"a": TaskStanding(served=1, covered=True), "b": TaskStanding(served=3, covered=False)}
    assert next_task(["a", "b"], standings) == "b"


def test_the_preference_ends_after_the_first_kernel_steps():
    standings = {"a": TaskStanding(served=1, covered=True),
                 "b": TaskStanding(served=FIRST_KERNEL_STEPS, covered=False)}
    assert next_task(["a", "b"], standings) == "a"


def test_a_stalled_task_is_served_like_the_rest():
    standings = {"a": TaskStanding(served=1, covered=True), "b": TaskStanding(served=2, covered=False, stalled=True)}
    assert next_task(["a", "b"], standings) == "a"
    standings["b"] = TaskStanding(served=1, covered=False, stalled=True)
    assert next_task(["b", "a"], standings) == "b"  # a tie: the order given decides


def test_covered_tasks_are_served_by_their_headroom():
    near_floor = TaskStanding(served=2, covered=True, floor_fraction=0.95)
    far = TaskStanding(served=10, covered=True, floor_fraction=0.3)
    unknown = TaskStanding(served=12, covered=True)
    assert near_floor.headroom == MIN_HEADROOM and far.headroom == 0.7 and unknown.headroom == 1.0
    # 2 steps at the floor weigh 20; 10 steps at 0.3 of it weigh 14.3; 12 with no position, 12
    assert next_task(["n", "f", "u"], {"n": near_floor, "f": far, "u": unknown}) == "u"
    assert next_task(["n", "f"], {"n": near_floor, "f": far}) == "f"
    above = TaskStanding(served=2, covered=True, floor_fraction=1.4)  # a TF32 convolution beats the fp32 floor
    assert above.headroom == MIN_HEADROOM


def test_ties_go_to_the_first_of_the_order_and_an_empty_order_gives_none():
    standings = {t: TaskStanding(served=0, covered=False) for t in "xyz"}
    assert next_task(["y", "z", "x"], standings) == "y"
    assert next_task([], standings) is None


def test_a_float32_gemm_at_the_fp32_rate_keeps_headroom_for_tensor_core_products():
    seed_at_cublas = {"fraction": 0.99, "bound": "compute", "half": False}
    assert floor_fraction(seed_at_cublas) == 0.99 / F32_COMPUTE_REACH
    gemm = TaskStanding(served=3, covered=True, floor_fraction=floor_fraction(seed_at_cublas))
    copy_at_floor = TaskStanding(served=3, covered=True, floor_fraction=floor_fraction(
        {"fraction": 0.99, "bound": "memory", "half": False}))
    assert gemm.headroom > 3 * copy_at_floor.headroom
    assert next_task(["copy", "gemm"], {"copy": copy_at_floor, "gemm": gemm}) == "gemm"
    # a bf16 task's floor is already the tensor cores' rate; older records say nothing of it
    assert floor_fraction({"fraction": 0.9, "bound": "compute", "half": True}) == 0.9
    assert floor_fraction({"fraction": 0.9, "bound": "compute"}) == 0.9
    assert floor_fraction(None) is None and floor_fraction({"fraction": "0.9"}) is None


def test_a_task_whose_seed_is_expected_waits_behind_uncovered_ones_with_none_not_behind_covered_ones():
    waiting = TaskStanding(served=0, covered=False, seed_expected=True)
    none_expected = TaskStanding(served=2, covered=False)
    covered = TaskStanding(served=0, covered=True)
    assert next_task(["w", "n"], {"w": waiting, "n": none_expected}) == "n"
    assert next_task(["c", "w"], {"c": covered, "w": waiting}) == "w"
    # past its first steps a task is served by count, seed or not
    done = TaskStanding(served=FIRST_KERNEL_STEPS, covered=False, seed_expected=True)
    assert done.priority() == TaskStanding(served=FIRST_KERNEL_STEPS, covered=False).priority()
