"""A KernelBench task file as SPEC (`python -m foundry.extract path/to/task.py --out DIR`):
the model is `Model(*get_init_inputs())`, its inputs `get_inputs()`, built seeded, so a
second load (deploy's) gives the same model; KernelBench's own level-3 files where they
are checked out beside the project."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from foundry.extract import UserModelError, read_manifest
from foundry.extract.__main__ import main as extract_main
from foundry.extract.spec import load_spec

LEVEL3 = Path(__file__).resolve().parents[2] / ".." / "shared" / "kernelbench" / "level3"

TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.fc = nn.Linear(d_in, d_out)

    def forward(self, x):
        return torch.relu(self.fc(x))


batch_size = 6
SMALL_SIZES = {"batch_size": 2}


def get_inputs():
    return [torch.randn(batch_size, 12)]


def get_init_inputs():
    return [12, 20]
'''


def test_a_task_file_gives_its_model_and_inputs_seeded(tmp_path):
    path = tmp_path / "relu_linear.py"
    path.write_text(TASK)
    model, inputs = load_spec(str(path))
    again, inputs_again = load_spec(str(path))
    assert type(model).__name__ == "Model" and [tuple(x.shape) for x in inputs] == [(6, 12)]
    assert torch.equal(model.fc.weight, again.fc.weight) and torch.equal(inputs[0], inputs_again[0])
    small, small_inputs = load_spec(str(path), sizes="small")
    assert tuple(small_inputs[0].shape) == (2, 12) and torch.equal(small.fc.weight, model.fc.weight)


def test_extract_cli_takes_a_task_file(tmp_path, capsys):
    path = tmp_path / "relu_linear.py"
    path.write_text(TASK)
    assert extract_main([str(path), "--out", str(tmp_path / "tasks"), "--device", "cpu", "--min-share", "0"]) == 0
    assert "Model: captured with torch.export" in capsys.readouterr().out
    manifest = read_manifest(tmp_path / "tasks")
    assert manifest.model_class == "Model" and manifest.spec == str(path) and manifest.device == "cpu"
    assert [r.label for r in manifest.regions] == ["linear_relu"]


@pytest.mark.parametrize("source, message", [
    (TASK.replace("def get_inputs", "def other_inputs"), r"not a KernelBench task \(missing get_inputs\)"),
    (TASK.replace("[torch.randn(batch_size, 12)]", "[torch.randn(batch_size, 12), 3]"),
     r"get_inputs\(\)\[1\] is a int"),
    (TASK.replace("return [12, 20]", "return [12]"), r"building Model\(\*get_init_inputs\(\)\)"),
])
def test_a_bad_task_file_raises_one_error_naming_it(tmp_path, source, message):
    path = tmp_path / "bad.py"
    path.write_text(source)
    with pytest.raises(UserModelError, match=message):
        load_spec(str(path))


def test_a_device_that_is_not_here_exits_2(tmp_path, capsys):
    path = tmp_path / "relu_linear.py"
    path.write_text(TASK)
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is here")
    assert extract_main([str(path), "--out", str(tmp_path / "tasks"), "--device", "cuda"]) == 2
    assert "torch sees no CUDA device here" in capsys.readouterr().err


def _level3(name: str) -> Path:
    path = LEVEL3 / name
    if not path.is_file():
        pytest.skip(f"KernelBench's level-3 files are not checked out at {LEVEL3.resolve()}")
    return path


def test_a_kernelbench_level3_file_as_spec(tmp_path, capsys):
    """LeNet-5 as KernelBench publishes it, its batch set to 2 (--set) to keep this quick."""
    path = _level3("4_LeNet5.py")
    assert extract_main([str(path), "--out", str(tmp_path / "tasks"), "--min-share", "0",
                         "--set", "batch_size=2"]) == 0
    assert "Model: captured with torch.export" in capsys.readouterr().out
    manifest = read_manifest(tmp_path / "tasks")
    assert manifest.model_class == "Model" and tuple(manifest.inputs[0].shape) == (2, 1, 32, 32)
    labels = [r.label for r in manifest.regions]
    assert labels.count("conv2d_relu_max_pool2d") == 2 and "linear_relu" in labels, labels
    for r in manifest.regions:
        assert (tmp_path / "tasks" / r.file).is_file()


def test_size_constants_are_set_by_name(tmp_path):
    from foundry.extract.spec import size_overrides
    path = tmp_path / "relu_linear.py"
    path.write_text(TASK)
    _, inputs = load_spec(str(path), overrides=size_overrides(["batch_size=3"]))
    assert tuple(inputs[0].shape) == (3, 12)
    with pytest.raises(UserModelError, match="names no module constant"):
        load_spec(str(path), overrides={"batch": 3})
    with pytest.raises(UserModelError, match="is not a Python literal"):
        size_overrides(["batch_size=two"])
