"""The matrix-product, convolution and pooling templates built by Triton's real compiler for an
sm_90 GPU (the H200) on a machine without one (support/triton_target.py, in a fresh
process since this session runs Triton's interpreter): the product cases with each
float32 product and bf16 operands, and the KernelBench level-1 products of the 40-problem
sample at their published sizes with the parameters the templates pick, each kernel
within the H200's shared memory. Where a GPU is present, tests/gpu runs them for real."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from foundry.templates.dot_precision import F32_DOT
from foundry.templates.engine import coverage, describe_task, variants
from support.triton_target import UNSUPPORTED
from tests.templates.helpers import make_task, published_problem
from tests.templates.product_cases import CONV_BLOCKS, CONV_CASES, GEMM_BLOCKS, GEMM_CASES

pytest.importorskip("triton")
pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="tests/gpu runs these kernels on the GPU")

ROOT = Path(__file__).resolve().parents[2]
KERNELBENCH = ROOT.parent / "shared" / "kernelbench"


def compile_for_hopper(builds: list[dict], timeout: float = 900) -> list[dict]:
    """Each build ({"path", "profile", "params", "variant"}) compiled for sm_90 in fresh
    processes without the interpreter (one per core, builds dealt out in turn); one result
    row per build, in order (support.triton_target.main)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests"), env.get("PYTHONPATH", "")])
    workers = max(1, min(len(builds), os.cpu_count() or 1))
    shares = [builds[i::workers] for i in range(workers)]
    procs = [subprocess.Popen([sys.executable, "-m", "support.triton_target"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
             for _ in shares]
    outputs = [proc.communicate(json.dumps(share), timeout=timeout) for proc, share in zip(procs, shares)]
    rows_by_share = []
    for proc, (stdout, stderr), share in zip(procs, outputs, shares):
        if proc.returncode == UNSUPPORTED:
            pytest.skip(stderr.strip().splitlines()[-1])
        if proc.returncode != 0:
            raise AssertionError(stderr[-3000:])
        rows = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
        assert len(rows) == len(share), stdout[-2000:]
        rows_by_share.append(rows)
    return [rows_by_share[i % workers][i // workers] for i in range(len(builds))]


def failures(rows: list[dict]) -> list[str]:
    return [f"{Path(r['path']).stem} {r['params']}: {r['error']}" for r in rows if r["error"]]


def test_gemm_cases_compile_for_hopper(tmp_path):
    builds, kernels = [], []
    for name, forward, inputs in GEMM_CASES:
        task = make_task(tmp_path, name, forward=forward, inputs=inputs, sig="A, B")
        # a one-column B runs the matrix-vector kernel (GEMV, on first) or the tiled one
        for gemv in ((1, 0) if "column" in name else (0,)):
            builds += [{"path": str(task.path), "params": {**GEMM_BLOCKS, "SPLIT_K": split_k, "F32_DOT": dot,
                                                           "GEMV": gemv}}
                       for split_k in (1, 3) for dot in F32_DOT]
            kernels += ["_gemv" if gemv else "_gemm"] * 2 * len(F32_DOT)
    rows = compile_for_hopper(builds)
    assert not failures(rows), failures(rows)
    assert all(kernel in [name for name, _ in r["kernels"]] for r, kernel in zip(rows, kernels))
    # the float32 operands not read K-contiguous (a row-major B) are copied by the tile copy
    assert any("_copy_tiles" in [name for name, _ in r["kernels"]] for r in rows)


def test_conv_cases_compile_for_hopper(tmp_path):
    builds = []
    for name, module, x in CONV_CASES:
        task = make_task(tmp_path, name, forward="return self.conv(x)", init=f"self.conv = {module}",
                         inputs=f"[{x}]", sig="x")
        # OUTER off: the implicit-GEMM kernels with each float32 product (OUTER's own kernel: below)
        builds += [{"path": str(task.path),
                    "params": {**CONV_BLOCKS, "F32_DOT": dot, "ALL_PHASES": all_phases, "OUTER": 0}}
                   for dot in F32_DOT for all_phases in (0, 1)]
    rows = compile_for_hopper(builds)
    assert not failures(rows), failures(rows)
    modules = {str(tmp_path / f"{name}.py"): eval(module, {"nn": torch.nn}) for name, module, _ in CONV_CASES}
    depthwise = {path for path, m in modules.items() if m.in_channels == m.groups}
    assert len(depthwise) == 5
    for r in rows:  # one input channel per group: the direct kernel; strided transposed: one launch, by rows or by phases
        names = {name for name, _ in r["kernels"]}
        module = modules[r["path"]]
        strided = module.transposed and max(module.stride) > 1
        want = ({"_conv_depthwise"} if r["path"] in depthwise else
                {"_conv_transposed_rows"} if strided and r["params"]["ALL_PHASES"] else
                {"_conv_transposed"} if module.transposed else {"_conv"})
        assert names == want, r


def test_the_taps_and_tiled_depthwise_kernels_compile_for_hopper(tmp_path):
    # TAPS on, at the tiles a KernelBench convolution gets by default (conv_tunable, with
    # CHANNELS_LAST on: the input copied channels-last first) and at the small ones (with it
    # off), standard and stride-1 transposed, 1-D to 3-D; OUTER on (a few input
    # channels per group) likewise; DW_TILE on, depthwise 1-D to 3-D, standard and strided
    # transposed
    from foundry.templates.conv_triton import conv_tunable
    cases = [("taps_conv2d", "nn.Conv2d(64, 128, 3)", "torch.randn(1, 64, 20, 24)"),
             ("taps_conv1d", "nn.Conv1d(64, 128, 3, stride=3, dilation=4)", "torch.randn(1, 64, 300)"),
             ("taps_transposed2d", "nn.ConvTranspose2d(64, 128, (3, 5))", "torch.randn(1, 64, 12, 20)"),
             ("taps_transposed3d", "nn.ConvTranspose3d(48, 24, 3)", "torch.randn(1, 48, 6, 6, 6)")]
    outer = [("outer_conv3d", "nn.Conv3d(3, 64, 3)", "torch.randn(1, 3, 10, 12, 9)"),
             ("outer_conv2d_strided", "nn.Conv2d(3, 96, 11, stride=4, padding=2)", "torch.randn(1, 3, 60, 50)"),
             ("outer_grouped_transposed1d", "nn.ConvTranspose1d(8, 6, 5, padding=2, groups=2)",
              "torch.randn(1, 8, 40)")]
    builds = []
    for name, module, x in cases + outer:
        task = make_task(tmp_path, name, forward="return self.conv(x)", init=f"self.conv = {module}",
                         inputs=f"[{x}]", sig="x")
        switch = "OUTER" if name.startswith("outer") else "TAPS"
        defaults = {k: v[0] for k, v in conv_tunable(describe_task(task).convs).items()}
        on, off = ({"CHANNELS_LAST": 1}, {"CHANNELS_LAST": 0}) if switch == "TAPS" else ({}, {})
        builds += [{"path": str(task.path), "params": {**defaults, switch: 1, **on}},
                   {"path": str(task.path), "params": {**CONV_BLOCKS, "F32_DOT": "ieee", switch: 1, **off}}]
    depthwise = [("tiles_depthwise2d", "nn.Conv2d(64, 64, 3, groups=64)", "torch.randn(1, 64, 40, 50)"),
                 ("tiles_depthwise1d", "nn.Conv1d(8, 16, 3, stride=2, groups=8)", "torch.randn(1, 8, 300)"),
                 ("tiles_transposed3d", "nn.ConvTranspose3d(4, 4, 3, stride=2, groups=4)", "torch.randn(1, 4, 5, 6, 7)")]
    for name, module, x in depthwise:
        task = make_task(tmp_path, name, forward="return self.conv(x)", init=f"self.conv = {module}",
                         inputs=f"[{x}]", sig="x")
        builds.append({"path": str(task.path), "params": {"DW_TILE": 1}})
    rows = compile_for_hopper(builds)
    assert not failures(rows), failures(rows)
    taps, outer_rows = 2 * len(cases), 2 * len(outer)
    assert all({name for name, _ in r["kernels"]} == {"_conv_taps", "_copy_tiles"} for r in rows[:taps:2]), rows
    assert all({name for name, _ in r["kernels"]} == {"_conv_taps"} for r in rows[1:taps:2]), rows
    assert all({name for name, _ in r["kernels"]} == {"_conv_outer"} for r in rows[taps:taps + outer_rows]), rows
    assert all({name for name, _ in r["kernels"]} == {"_conv_depthwise_tiles"} for r in rows[-3:]), rows[-3:]


def test_bfloat16_products_and_an_oversized_tile(tmp_path):
    gemm = make_task(tmp_path, "bf16_product", forward="return torch.matmul(A, B.T)", sig="A, B",
                     inputs="[torch.randn(70, 300).to(torch.bfloat16), torch.randn(50, 300).to(torch.bfloat16)]")
    conv = make_task(tmp_path, "bf16_conv", forward="return self.conv(x)", sig="x",
                     init="self.conv = nn.Conv2d(4, 6, 3, padding=1).to(torch.bfloat16)",
                     inputs="[torch.randn(2, 4, 12, 10).to(torch.bfloat16)]")
    huge = make_task(tmp_path, "huge_tile", forward="return A @ B", sig="A, B",
                     inputs="[torch.randn(512, 512), torch.randn(512, 512)]")
    too_big = {"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 64, "SPLIT_K": 1, "GROUP_M": 8, "num_warps": 8,
               "num_stages": 4, "F32_DOT": "tf32x3"}
    rows = compile_for_hopper([{"path": str(gemm.path)}, {"path": str(conv.path)},
                             {"path": str(huge.path), "params": too_big}])
    assert not failures(rows[:2]), failures(rows[:2])
    assert rows[2]["error"].startswith("OutOfResources"), rows[2]  # more shared memory than an H200 has


def test_kernelbench_products_at_published_sizes_compile_for_hopper():
    # the products of the 40-problem sample (every 4th problem of level 1 by number, as
    # benchmarks/kernelbench_sample.py picks them): compiling all 39 takes minutes here
    published_problem(KERNELBENCH / "level1" / "1_Square_matrix_multiplication_.py")  # skips without them
    numbered = {int(p.name.split("_", 1)[0]): p for p in (KERNELBENCH / "level1").glob("*_*.py")}
    paths = []
    for number in sorted(numbered)[::4]:
        task = published_problem(numbered[number])
        if coverage(task) is None and (describe_task(task).gemm is not None or describe_task(task).convs):
            paths.append(str(numbered[number]))
    assert len(paths) >= 10, paths
    rows = compile_for_hopper([{"path": p, "profile": "full"} for p in paths])
    assert not failures(rows), failures(rows)


def test_linear_templates_compile_for_hopper(tmp_path):
    task = make_task(tmp_path, "linear_softmax", forward="return torch.softmax(self.l(x), dim=1)", sig="x",
                     init="self.l = nn.Linear(300, 200)", inputs="[torch.randn(70, 300)]")
    epilogue = make_task(tmp_path, "linear_gelu", forward="return F.gelu(self.l(x)) * 0.5", sig="x",
                         init="self.l = nn.Linear(300, 200)", inputs="[torch.randn(70, 300)]")
    rows = compile_for_hopper([{"path": str(task.path), "variant": "linear", "params": {"F32_DOT": dot}}
                             for dot in F32_DOT] + [{"path": str(epilogue.path), "variant": "matmul"}])
    assert not failures(rows), failures(rows)
    assert ["_linear" in [name for name, _ in r["kernels"]] for r in rows] == [True, True, False]
    assert "_mm_epilogue" in [name for name, _ in rows[2]["kernels"]]


def test_kernelbench_pooling_at_published_sizes_compiles_for_hopper():
    # the pooling problems of level 1: tiles of one output row (a long W, as level1/41's
    # 65536) and of several (a W shorter than BLOCK, as level1/46's 128)
    published_problem(KERNELBENCH / "level1" / "41_Max_Pooling_1D.py")  # skips without them
    paths = sorted(str(p) for p in (KERNELBENCH / "level1").glob("4[1-6]_*Pooling*.py"))
    assert len(paths) >= 4, paths
    rows = compile_for_hopper([{"path": p, "profile": "full"} for p in paths])
    assert not failures(rows), failures(rows)
    assert all([name for name, _ in r["kernels"]] == ["_k0_pool"] for r in rows), rows


def test_conv_kernels_template_compiles_for_hopper(tmp_path):
    task = make_task(tmp_path, "conv_relu_bias", forward="return torch.relu(self.conv(x)) + self.b", sig="x",
                     init="self.conv = nn.Conv2d(16, 32, 3, padding=1)\nself.b = nn.Parameter(torch.randn(32, 1, 1))",
                     inputs="[torch.randn(2, 16, 40, 40)]")
    up = make_task(tmp_path, "transposed_tanh", forward="return torch.tanh(self.up(x))", sig="x",
                   init="self.up = nn.ConvTranspose2d(16, 8, 3, stride=2, padding=1, output_padding=1)",
                   inputs="[torch.randn(2, 16, 20, 20)]")
    rows = compile_for_hopper([{"path": str(t.path), "variant": "conv", "params": {"F32_DOT": dot}}
                               for t in (task, up) for dot in F32_DOT])
    assert not failures(rows), failures(rows)
    names = [{name for name, _ in r["kernels"]} for r in rows]
    assert all("_conv" in n for n in names[:2]) and all("_conv_transposed_rows" in n for n in names[2:]), names


def test_kernelbench_level2_convolutions_with_conv_kernels_compile_for_hopper():
    # the level-2 convolution tasks of the 40-problem sample (every 4th problem by number),
    # template "conv" at their published sizes: the regions' kernels and the convolutions'
    published_problem(KERNELBENCH / "level2" / "1_Conv2D_ReLU_BiasAdd.py")  # skips without them
    numbered = {int(p.name.split("_", 1)[0]): p for p in (KERNELBENCH / "level2").glob("*_*.py")}
    paths = [str(numbered[n]) for n in sorted(numbered)[::4]
             if "conv" in variants(published_problem(numbered[n]), "triton")]
    assert len(paths) >= 10, paths
    rows = compile_for_hopper([{"path": p, "profile": "full", "variant": "conv"} for p in paths])
    assert not failures(rows), failures(rows)
    assert all({"_conv", "_conv_taps", "_conv_outer", "_conv_transposed", "_conv_transposed_rows", "_conv_depthwise"}
               & {name for name, _ in r["kernels"]}
               for r in rows), rows
