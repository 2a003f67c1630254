"""Every op family through the `c` backend, against the reference on the CPU."""

import pytest

from tests.templates.cases import CASES
from tests.templates.helpers import TASKS, assert_close, make_task, run_candidate

from foundry.tasks import load_task


@pytest.mark.parametrize("name,forward,init,init_args,inputs", CASES, ids=[c[0] for c in CASES])
def test_case_matches_reference_in_c(tmp_path, name, forward, init, init_args, inputs):
    task = make_task(tmp_path, name, forward=forward, init=init, init_args=init_args, inputs=inputs)
    ref, got = run_candidate(task, backend="c")
    assert_close(ref, got)


@pytest.mark.parametrize("path", sorted(TASKS.glob("*.py")), ids=lambda p: p.stem)
def test_task_files_match_reference_in_c(path):
    task = load_task(path, profile="small")
    ref, got = run_candidate(task, backend="c")
    assert_close(ref, got)


@pytest.mark.parametrize("params", [
    {"BLOCK": 1024, "IBLOCK": 16, "SIMD": 8, "SCHED": "dynamic"},
    {"BLOCK": 65536, "IBLOCK": 256, "SIMD": 16, "SCHED": "static"},
])
def test_every_parameter_point_is_correct(tmp_path, params):
    task = make_task(tmp_path, "mixed", forward="return torch.softmax(torch.sum(xs[0], dim=1) * 2.0, dim=-1)",
                     inputs="[torch.randn(3, 300, 70)]")
    ref, got = run_candidate(task, backend="c", params=params)
    assert_close(ref, got)


def test_candidate_calls_its_compiled_library_in_forward(tmp_path):
    from foundry import kernels
    task = make_task(tmp_path, "relu", forward="return torch.relu(xs[0]) * 3.0")
    kernels.reset_launches()
    run_candidate(task, backend="c")
    assert any(backend == "c" for backend, _ in kernels.launches())


@pytest.mark.parametrize("forward,second", [
    ("return F.kl_div(xs[0], xs[1], reduction='batchmean', log_target=True)", "torch.randn({n}, 33)"),
    ("return F.cross_entropy(xs[0], xs[1])", "torch.randint(0, 33, ({n},))"),
    ("return F.smooth_l1_loss(xs[0], xs[1])", "torch.randn({n}, 33)"),
])
def test_a_reduced_loss_follows_the_batch_size_it_is_called_with(tmp_path, forward, second):
    """Nothing of the traced batch size is baked in: the candidate made for 4 rows is right
    for 9 (the judge's shape variants and a deployed kernel see other batch sizes)."""
    import torch

    from foundry.templates.engine import emit, reference_and_inputs
    from foundry.tuning.inprocess import load_candidate
    task = make_task(tmp_path, "loss", forward=forward, inputs=f"[torch.randn(4, 33), {second.format(n=4)}]")
    model, init, _ = reference_and_inputs(task, seed=7)
    candidate = load_candidate(emit(task, backend="c"), {}).ModelNew(*init)
    torch.manual_seed(1)
    other = [torch.randn(9, 33), eval(second.format(n=9))]
    with torch.no_grad():
        assert_close(model(*other), candidate(*other))


@pytest.mark.parametrize("forward,varied", [
    ("return torch.relu(xs[0]) * 3.0", {"BLOCK", "SIMD", "SCHED"}),
    ("return F.max_pool2d(xs[0], 2)", {"SCHED"}),
    ("return torch.softmax(xs[0], dim=1)", {"SCHED", "IBLOCK"}),
])
def test_only_settings_that_change_a_kernel_are_tuned(tmp_path, forward, varied):
    from foundry.templates.backend_c import tunable_for
    from foundry.templates.engine import describe_task
    task = make_task(tmp_path, "t", forward=forward, inputs="[torch.randn(2, 3, 6, 8)]")
    space = tunable_for(describe_task(task))
    assert {name for name, values in space.items() if len(values) > 1} == varied


def test_a_transcendental_chain_compiles_to_vector_code(tmp_path):
    """The elementwise loop of a tanh/sigmoid/exp chain vectorizes under the flags the
    candidate builds with (GCC left it scalar, 3x slower than eager, while the selects of
    kf_tanh and kf_exp counted as control flow under trapping math)."""
    import ast
    import re
    import subprocess

    from foundry.kernels import c
    from foundry.templates.engine import emit
    from foundry.tuning.inprocess import load_candidate
    cc = c.compiler("c")
    version = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=10).stdout
    if "GCC" not in version and "gcc" not in version:
        pytest.skip(f"the vectorizer report is GCC's (the C compiler here is {cc})")
    task = make_task(tmp_path, "chain", forward="return torch.tanh(xs[0]) * torch.sigmoid(xs[0]) - torch.exp(-xs[0])",
                     inputs="[torch.randn(64, 512)]")
    source = emit(task, backend="c")
    module = load_candidate(source, {})
    flags = ast.literal_eval(re.search(r"c\.build\(_fill\(_C_SRC, params\), flags=(\(.*?\))\)", source).group(1))
    (tmp_path / "k.c").write_text(module._fill(module._C_SRC, dict(module.PARAMS)))
    report = subprocess.run([cc, *c.DEFAULT_FLAGS, *flags, "-fopt-info-vec-optimized", "-c", "k.c", "-o", "k.o"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stderr[-2000:]
    assert "loop vectorized" in report.stderr, report.stderr[-2000:]
