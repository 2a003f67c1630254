"""The Triton transform on real Inductor output from an H200 (data/): every kernel becomes a
plain @triton.jit function launched with the config Inductor's autotuner picked, the grid
computed by Inductor's own rule; the candidate parses, passes the judge's static checks,
and, under Triton's interpreter, its kernels compute the reference's values (on the first
programs of each grid: the samples are at full size, too large to interpret whole here)."""

from __future__ import annotations

import ast
import importlib.util
import os
from pathlib import Path

import pytest
import torch

from foundry.evaluate.backends import get_backend
from foundry.evaluate.static_checks import check_source
from foundry.seeds.triton_seed import seed_from_output_code
from foundry.tasks import load_task
from tests.seeds.conftest import ROOT, h200_sample

SUITE = ROOT / "benchmarks" / "suite"
SAMPLES = {  # sample -> (task file, the task's constants the sample was made at)
    "h200_masked_cumsum": (SUITE / "level1" / "42_Masked_cumsum.py", None),
    "h200_rmsnorm": (SUITE / "level1" / "33_RMSNorm.py", None),
    "h200_conv2d_relu_biasadd": (SUITE / "level2" / "23_Conv2d_ReLU_BiasAdd.py", {"BATCH": 128}),
}


def _seed(name: str):
    path, sizes = SAMPLES[name]
    task = load_task(path, profile="full")
    code, configs = h200_sample(name)
    small = load_task(path, profile="small").size_overrides
    return task, seed_from_output_code(task, code, configs, sizes=sizes, mapping_sizes=small)


@pytest.fixture(scope="module")
def seeds():
    return {name: _seed(name) for name in SAMPLES}


def _launches(source: str) -> dict:
    """kernel name -> (grid, keyword arguments) of each `kernel[grid](...)` in forward."""
    found = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript):
            found[ast.unparse(node.func.value)] = (ast.literal_eval(node.func.slice),
                                                   {k.arg: ast.literal_eval(k.value) for k in node.keywords})
    return found


@pytest.mark.parametrize("name", list(SAMPLES))
def test_sample_becomes_a_plain_triton_candidate(seeds, name):
    task, seed = seeds[name]
    assert seed.ok and seed.backend == "triton", seed.note
    compile(seed.source, "seed.py", "exec")
    for gone in ("triton_heuristics", "async_compile", ".run(", "set_driver_to_gpu", "DeviceProperties"):
        assert gone not in seed.source, gone
    report = check_source(seed.source, backend=get_backend("triton"), task_source=task.source)
    assert report.flags == (), report.reasons
    _, configs = h200_sample(name)
    launches = _launches(seed.source)
    assert set(launches) == set(configs)
    for kernel, (grid, kwargs) in launches.items():
        chosen = configs[kernel][0]
        assert {k: kwargs[k] for k in chosen["kwargs"]} == chosen["kwargs"]
        assert (kwargs["num_warps"], kwargs["num_stages"]) == (chosen["num_warps"], chosen["num_stages"])
        assert len(grid) == 3 and all(g >= 1 for g in grid)


def test_two_dimensional_grids_follow_the_config(seeds):
    """Grid2D: (ceil(xnumel / XBLOCK), ceil(ynumel / YBLOCK), 1), numels as the wrapper passes them."""
    _, seed = seeds["h200_conv2d_relu_biasadd"]
    tree = ast.parse(seed.source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript):
            grid = ast.literal_eval(node.func.slice)
            kw = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
            ynumel, xnumel = (ast.literal_eval(a) for a in node.args[-2:])
            assert grid == (-(-xnumel // kw["XBLOCK"]), -(-ynumel // kw["YBLOCK"]), 1)


def test_output_code_made_at_other_sizes_is_refused():
    path, _ = SAMPLES["h200_rmsnorm"]
    code, configs = h200_sample("h200_rmsnorm")
    small = load_task(path, profile="small").size_overrides
    seed = seed_from_output_code(load_task(path, profile="full"), code, configs, sizes=small, mapping_sizes=small)
    assert not seed.ok and "generated at other sizes" in seed.note


class _InterpretedLibdevice:
    """Triton's interpreter runs tl.math, but libdevice's functions are stubs there (they
    bind to the GPU's library when compiled): under the interpreter, a kernel's libdevice
    call runs tl.math's function of the same name."""

    def __getattr__(self, name: str):
        import triton.language as tl
        if not hasattr(tl.math, name):
            pytest.skip(f"libdevice.{name} has no tl.math counterpart for the interpreter")
        return getattr(tl.math, name)


class _FirstPrograms:
    """Stands in for a kernel: launches only the first `n` programs along the grid's x."""

    def __init__(self, kernel, n: int) -> None:
        self.kernel, self.n = kernel, n

    def __getitem__(self, grid):
        return self.kernel[(min(grid[0], self.n),) + tuple(grid[1:])]


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="runs under Triton's interpreter (CPU)")
@pytest.mark.parametrize("name", ["h200_masked_cumsum", "h200_rmsnorm"])
def test_interpreted_kernels_match_the_reference(seeds, tmp_path, name):
    """Row kernels (XBLOCK=1: program i computes row i): the first rows of forward's output
    are the reference's; full-size inputs, the seed's own launch arguments and configs."""
    from foundry.tasks.loader import build_module

    task, seed = seeds[name]
    path = tmp_path / "seed.py"
    path.write_text(seed.source)
    spec = importlib.util.spec_from_file_location(f"seed_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rows = 3
    module.libdevice = _InterpretedLibdevice()
    for kernel in list(_launches(seed.source)):
        setattr(module, kernel, _FirstPrograms(getattr(module, kernel), rows))
    task_module = build_module(task)
    torch.manual_seed(0)
    init, inputs = task_module.get_init_inputs(), task_module.get_inputs()
    reference = task_module.Model(*init).eval()
    model = module.ModelNew(*init).eval()
    model.load_state_dict(reference.state_dict())
    with torch.no_grad():
        got = model(*inputs)
        want = reference(*[x[:rows] for x in inputs])
    torch.testing.assert_close(got[:rows], want, atol=1e-4, rtol=1e-4)


def test_cli_makes_a_triton_seed_from_saved_output_code(tmp_path, capsys):
    from foundry.seeds.__main__ import main
    from tests.seeds.conftest import DATA
    out = tmp_path / "seed.py"
    task = SAMPLES["h200_masked_cumsum"][0]
    assert main([str(task), "--device", "cuda", "--output-code", str(DATA / "h200_masked_cumsum.py.txt"),
                 "--configs", str(DATA / "h200_masked_cumsum.configs.json"), "--out", str(out)]) == 0
    assert "@triton.jit" in out.read_text() and "triton seed" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main([str(task), "--device", "cuda", "--output-code", str(DATA / "h200_masked_cumsum.py.txt")])
    assert e.value.code == 2


TEMPLATE_KERNEL = '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.hints import DeviceProperties

@triton_heuristics.template(
    num_stages=3,
    num_warps=4,
    triton_meta={'signature': {'arg_A': '*fp32', 'arg_B': '*fp32', 'out_ptr0': '*fp32'},
                 'device': DeviceProperties(type='cuda', index=0), 'constants': {}},
    inductor_meta={'kernel_name': 'triton_tem_fused_mm_0', 'grid_type': 'FixedGrid',
                   'fixed_grid': ['_grid_0', '_grid_1', '_grid_2'],
                   'extra_launcher_args': ['_grid_0', '_grid_1', '_grid_2']},
)
@triton.jit
def triton_tem_fused_mm_0(arg_A, arg_B, out_ptr0):
    BLOCK_M : tl.constexpr = 64
    BLOCK_N : tl.constexpr = 64
    pid = tl.program_id(0)
    tl.store(out_ptr0 + pid, tl.load(arg_A + pid) * tl.load(arg_B + pid))
'''


def test_a_gemm_template_is_launched_on_the_grid_its_wrapper_passes():
    """Max-autotune's Triton templates (FixedGrid): the wrapper passes the grid after the
    kernel's arguments; the launch puts it in the brackets and keeps the template's
    warps and stages, its block sizes staying constants of the body."""
    from foundry.seeds.triton_kernels import TritonSeedError, launch_source, parse_triton_kernel

    kernel = parse_triton_kernel("triton_tem_fused_mm_0", TEMPLATE_KERNEL)
    assert kernel.heuristic == "template" and kernel.grid_type == "FixedGrid" and kernel.constexprs == ()
    assert "triton_heuristics" not in kernel.source and "BLOCK_M: tl.constexpr = 64" in kernel.source
    call = ast.parse("k.run(arg0_1, arg1_1, buf0, 64, 2, 1, stream=stream0)").body[0].value
    text = launch_source(kernel, call, {"kwargs": {}, "num_warps": 4, "num_stages": 3})
    assert text == "triton_tem_fused_mm_0[(64, 2, 1)](arg0_1, arg1_1, buf0, num_warps=4, num_stages=3)"
    short = ast.parse("k.run(arg0_1, arg1_1, buf0, stream=stream0)").body[0].value
    with pytest.raises(TritonSeedError, match="3 grid values"):
        launch_source(kernel, short, {"kwargs": {}, "num_warps": 4, "num_stages": 3})


GEMM_TF32_OFF = TEMPLATE_KERNEL.replace(
    "    pid = tl.program_id(0)\n",
    "    ALLOW_TF32 : tl.constexpr = False\n    pid = tl.program_id(0)\n"
    "    acc = tl.dot(tl.load(arg_A + pid), tl.load(arg_B + pid), allow_tf32=ALLOW_TF32, out_dtype=tl.float32)\n")


def test_a_template_with_tf32_off_states_ieee_dots_and_passes_the_precision_guard():
    """Inductor's templates name TF32 where they turn it off; the seed's dots say
    input_precision="ieee" instead (the same product), so the judge's precision guard,
    which reads any other TF32 as used, passes them. Turned on, it stays and is flagged."""
    from foundry.seeds.triton_kernels import parse_triton_kernel

    def flags(kernel_source: str) -> dict:
        return check_source(kernel_source + "\n\nclass ModelNew:\n    pass\n", backend=get_backend("triton")).reasons

    off = parse_triton_kernel("triton_tem_fused_mm_0", GEMM_TF32_OFF)
    assert "tf32" not in off.source.lower() and 'input_precision="ieee"' in off.source.replace("'", '"')
    assert "precision_drop" not in flags(off.source)
    on = parse_triton_kernel("triton_tem_fused_mm_0", GEMM_TF32_OFF.replace("= False", "= True"))
    assert "allow_tf32=ALLOW_TF32" in on.source and "ALLOW_TF32: tl.constexpr = True" in on.source
    assert "precision_drop" in flags(on.source)
    twice = GEMM_TF32_OFF.replace("    pid = tl.program_id(0)\n", "    pid = tl.program_id(0)\n    ALLOW_TF32 = pid > 0\n")
    assert "allow_tf32=ALLOW_TF32" in parse_triton_kernel("triton_tem_fused_mm_0", twice).source  # set twice: kept


@pytest.mark.parametrize("name, only", [("level1/51_Conv2d.py", True), ("level1/01_Square_matmul.py", True),
                                        ("level1/08_ReLU.py", False), ("level2/01_Gemm_ReLU.py", False),
                                        ("level2/23_Conv2d_ReLU_BiasAdd.py", False)])
def test_a_task_that_is_only_a_library_op_is_told_apart(name, only):
    """The seed's rule for a default-mode seed that calls the library: the judge rejects
    the library call where the task's reference computes nothing else (recorded as the
    judge records it, here on the meta device), so that seed is not kept there."""
    from foundry.seeds.seed import library_work

    task = load_task(Path(__file__).resolve().parents[2] / "benchmarks" / "suite" / name, profile="full")
    assert bool(library_work(task)) is only


@pytest.mark.parametrize("name, convolution", [("level1/51_Conv2d.py", True), ("level1/01_Square_matmul.py", False)])
def test_a_lone_convolution_is_told_from_a_lone_matmul(name, convolution):
    """A task that is only library convolutions gets no max-autotune seed (Inductor's
    Triton convolution templates are far slower than cuDNN); a lone matmul still does."""
    from foundry.evaluate.verdict import CONVOLUTION_OPS
    from foundry.seeds.seed import library_work

    task = load_task(Path(__file__).resolve().parents[2] / "benchmarks" / "suite" / name, profile="full")
    ops = library_work(task)
    assert ops and bool(ops & CONVOLUTION_OPS) is convolution
