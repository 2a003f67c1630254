"""KernelBench problems the templates were widened for (pooling over 1-3 dims, dilated,
global average, pooling after a convolution or GEMM; losses reduced to one value; cross
entropy; a minimum with a tensor constant; torch.multiply; an exclusive cumsum written
with select), read from the shared KernelBench folder and run at small sizes: the
template applies, and its kernels match the reference in C and in Triton's interpreter.
Skipped where the folder is absent."""

import os

os.environ["TRITON_INTERPRET"] = "1"

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from tests.templates.helpers import assert_close, run_candidate  # noqa: E402

from foundry.tasks import load_task  # noqa: E402
from foundry.templates.engine import coverage  # noqa: E402

KERNELBENCH = Path(__file__).resolve().parents[2].parent / "shared" / "kernelbench"
SPATIAL_3D = {"batch_size": 2, "depth": 6, "height": 8, "width": 10}

# (problem file, size constants small enough for the interpreter)
PROBLEMS = [
    ("level1/41_Max_Pooling_1D.py", {"batch_size": 2, "features": 3, "sequence_length": 50}),
    ("level1/44_Average_Pooling_1D.py", {"batch_size": 2, "in_channels": 3, "input_length": 50}),
    ("level1/46_Average_Pooling_3D.py", {**SPATIAL_3D, "channels": 3}),
    ("level2/6_Conv3d_Softmax_MaxPool_MaxPool.py", {**SPATIAL_3D, "depth": 10, "height": 10}),
    ("level2/50_ConvTranspose3d_Scaling_AvgPool_BiasAdd_Scaling.py", SPATIAL_3D),
    ("level2/55_Matmul_MaxPool_Sum_Scale.py", {"batch_size": 3, "in_features": 20, "out_features": 16}),
    ("level2/67_Conv2d_GELU_GlobalAvgPool.py", {"batch_size": 2, "out_channels": 5, "height": 9, "width": 7}),
    ("level2/72_ConvTranspose3d_BatchNorm_AvgPool_AvgPool.py", SPATIAL_3D),
    ("level2/74_ConvTranspose3d_LeakyReLU_Multiply_LeakyReLU_Max.py",
     {**SPATIAL_3D, "in_channels": 3, "out_channels": 4, "multiplier_shape": (4, 1, 1, 1)}),
    ("level2/77_ConvTranspose3d_Scale_BatchNorm_GlobalAvgPool.py",
     {**SPATIAL_3D, "in_channels": 3, "out_channels": 4}),
    ("level2/89_ConvTranspose3d_MaxPool_Softmax_Subtract_Swish_Max.py", SPATIAL_3D),
    ("level2/96_ConvTranspose3d_Multiply_Max_GlobalAvgPool_Clamp.py", SPATIAL_3D),
    ("level2/31_Conv2d_Min_Add_Multiply.py", {"batch_size": 2, "in_channels": 3, "out_channels": 4, "height": 9,
                                              "width": 9, "bias_shape": (4, 1, 1)}),
    ("level2/52_Conv2d_Activation_BatchNorm.py", {"batch_size": 2, "in_channels": 3, "out_channels": 4, "height": 9,
                                                  "width": 9}),
    ("level1/92_cumsum_exclusive.py", {"batch_size": 3, "input_shape": (50,)}),
    ("level1/94_MSELoss.py", {"batch_size": 3, "input_shape": (500,)}),
    ("level1/95_CrossEntropyLoss.py", {"batch_size": 6, "num_classes": 300, "input_shape": (300,)}),
    ("level1/96_HuberLoss.py", {"batch_size": 3, "input_shape": (500,)}),
    ("level1/99_TripletMarginLoss.py", {"batch_size": 5, "input_shape": (300,)}),
    ("level1/100_HingeLoss.py", {"batch_size": 40, "input_shape": (40,)}),  # its targets broadcast over rows
]


def _small_task(tmp_path: Path, problem: str, sizes: dict):
    source = KERNELBENCH / problem
    if not source.exists():
        pytest.skip(f"the KernelBench problems are not at {KERNELBENCH}")
    path = tmp_path / source.name
    path.write_text(source.read_text() + f"\n\nSMALL_SIZES = {sizes!r}\n")
    return load_task(path, profile="small")


@pytest.mark.parametrize("backend", ["c", "triton"])
@pytest.mark.parametrize("problem,sizes", PROBLEMS, ids=[p.split("/")[-1][:-3] for p, _ in PROBLEMS])
def test_kernelbench_problem_is_covered_and_matches(tmp_path, problem, sizes, backend):
    if backend == "triton":
        pytest.importorskip("triton")
    task = _small_task(tmp_path, problem, sizes)
    assert coverage(task) is None
    params = {"BLOCK": 64, "SPLIT": 2} if backend == "triton" else None
    ref, got = run_candidate(task, backend=backend, params=params)
    assert_close(ref, got)
