"""Roofline floor: bytes and FLOPs of known tasks, the floor formula, ceilings."""

from __future__ import annotations

import pytest

from foundry.tasks.roofline import (DeviceCeilings, H200_COPY_BYTES_PER_S, H200_FP32_FLOPS_PER_S,
                                    floor_ms, measure_ceilings, roofline_for_task)
from foundry.tasks.suite import load_suite


def _task(level: int, num: int, profile: str = "full"):
    return load_suite(level=level, ids=[num], profile=profile)[0]


def test_square_matmul_counts_2n3_flops_and_three_matrices():
    n = 4096
    roof = roofline_for_task(_task(1, 1))
    assert roof.flops == 2 * n ** 3
    assert roof.min_bytes == 3 * n * n * 4
    assert roof.bound == "compute"
    assert roof.floor_ms == pytest.approx(2 * n ** 3 / H200_FP32_FLOPS_PER_S * 1e3)
    assert roof.counted_on == "meta"  # no 4096^2 matrices were allocated


def test_relu_is_memory_bound_on_input_plus_output():
    roof = roofline_for_task(_task(1, 8))
    elements = 8192 * 16384
    assert roof.flops == 0 and roof.bound == "memory"
    assert roof.min_bytes == 2 * elements * 4
    assert roof.floor_ms == pytest.approx(2 * elements * 4 / H200_COPY_BYTES_PER_S * 1e3)
    assert roof.fraction(roof.floor_ms * 2) == pytest.approx(0.5)
    assert roof.fraction(None) is None


def test_parameters_count_once_and_small_profile_is_smaller():
    # Linear(4096 -> 4096) on 4096 rows, ReLU: x, W, b, out
    roof = roofline_for_task(_task(2, 1))
    assert roof.min_bytes == (4096 * 4096 * 3 + 4096) * 4
    assert roof.flops == 2 * 4096 ** 3
    small = roofline_for_task(_task(2, 1, "small"))
    assert small.flops == 2 * 256 * 512 * 384


def test_other_ceilings_and_the_floor_formula():
    slow = DeviceCeilings(bandwidth_bytes_per_s=1e9, flops_per_s=1e9, source="test")
    assert floor_ms(min_bytes=2_000_000, flops=1_000_000, ceilings=slow) == (2.0, 1.0, 2.0)
    roof = roofline_for_task(_task(1, 1, "small"), ceilings=slow)
    assert roof.bandwidth_bytes_per_s == 1e9 and roof.floor_ms == pytest.approx(2 * 256 ** 3 / 1e9 * 1e3)


def test_a_task_in_bfloat16_is_floored_at_the_bf16_matmul_rate(tmp_path):
    path = tmp_path / "bf16_matmul.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\nN = 512\n\n"
        "class Model(nn.Module):\n    def forward(self, a, b):\n        return a @ b\n\n"
        "def get_inputs():\n    return [torch.randn(N, N, dtype=DTYPE), torch.randn(N, N, dtype=DTYPE)]\n\n"
        "def get_init_inputs():\n    return []\n")
    ceilings = DeviceCeilings(bandwidth_bytes_per_s=1e12, flops_per_s=1e12, half_flops_per_s=16e12, source="test")
    text = path.read_text()
    path.write_text("DTYPE = None\n" + text.replace("dtype=DTYPE", "dtype=torch.bfloat16"))
    (half,) = load_suite(path=path, profile="full")
    path.write_text("DTYPE = None\n" + text.replace("dtype=DTYPE", "dtype=torch.float32"))
    (single,) = load_suite(path=path, profile="full")
    h, s = roofline_for_task(half, ceilings=ceilings), roofline_for_task(single, ceilings=ceilings)
    assert h.flops == s.flops == 2 * 512 ** 3
    assert h.flops_per_s == 16e12 and s.flops_per_s == 1e12
    assert h.compute_ms == pytest.approx(s.compute_ms / 16)


def test_data_dependent_reference_falls_back_to_a_real_device(tmp_path):
    path = tmp_path / "nonzero_task.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\nN = 32\n\n"
        "class Model(nn.Module):\n    def forward(self, x):\n        return x[x > 0].sum().reshape(1) * int((x > 0).sum().item() > 0)\n\n"
        "def get_inputs():\n    return [torch.randn(N, N)]\n\n"
        "def get_init_inputs():\n    return []\n")
    (task,) = load_suite(path=path, profile="full")
    roof = roofline_for_task(task)
    assert roof.counted_on == "cpu" and roof.min_bytes == 32 * 32 * 4 + 4


def test_measured_cpu_ceilings_are_plausible():
    c = measure_ceilings("cpu", copy_bytes=1 << 24, matmul_n=256, repeats=2)
    assert 1e8 < c.bandwidth_bytes_per_s < 1e12
    assert 1e7 < c.flops_per_s < 1e13 and 1e6 < c.half_flops_per_s < 1e14
    assert "measured on cpu" in c.source and "bf16" in c.source


def test_a_kernels_position_against_the_floor_and_its_diagnosis():
    roof = roofline_for_task(_task(1, 8))  # ReLU: memory-bound, 2 x 512 MiB
    pos = roof.position(roof.floor_ms / 0.4)
    assert pos["bound"] == "memory" and pos["fraction"] == pytest.approx(0.4)
    assert pos["achieved_gb_per_s"] == pytest.approx(0.4 * H200_COPY_BYTES_PER_S / 1e9, rel=1e-3)
    assert pos["peak_gb_per_s"] == pytest.approx(H200_COPY_BYTES_PER_S / 1e9)
    assert pos["diagnosis"].startswith("memory-bound: 40% of the floor (moves 1.07 GB at 1700 GB/s of 4250")
    matmul = roofline_for_task(_task(1, 1))
    assert matmul.position(matmul.floor_ms)["diagnosis"].startswith("compute-bound: 100% of the floor (137 GFLOP at 51.0")


def test_without_a_fallback_a_data_dependent_reference_raises(tmp_path):
    path = tmp_path / "nonzero_task.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\n\n"
        "class Model(nn.Module):\n    def forward(self, x):\n        return x[x > 0].sum().reshape(1)\n\n"
        "def get_inputs():\n    return [torch.randn(8, 8)]\n\n"
        "def get_init_inputs():\n    return []\n")
    (task,) = load_suite(path=path, profile="full")
    with pytest.raises(Exception):
        roofline_for_task(task, fallback_device=None)
