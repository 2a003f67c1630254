"""A KernelBench task file as SPEC: `Model(*get_init_inputs())` and `get_inputs()`, built
as the judge builds a task (foundry.tasks: the file's size constants for the profile,
parameters drawn from seed INIT_SEED on the device, inputs from seed INPUT_SEED), so a
second load of the same file (by `deploy`, say) gives the same model."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn as nn

from foundry.extract.errors import UserModelError
from foundry.tasks.inputs import build_device, seeded
from foundry.tasks.loader import TaskError, build_module, load_task

INIT_SEED = 0
INPUT_SEED = 1


def load_task_spec(spec: str, *, device: str = "cpu", sizes: str = "full",
                   overrides: dict | None = None) -> tuple[nn.Module, tuple]:
    """(model, inputs) of the task file `spec` at `sizes` ("full" or "small"), its module
    constants in `overrides` set after those (`{"batch_size": 2}`), on `device`."""
    path = Path(spec).expanduser()
    if not path.is_file():
        raise UserModelError(f"SPEC {spec!r}: no file {path.resolve()}")
    try:
        task = load_task(path, profile=sizes)
        module = build_module(task, overrides)
    except TaskError as e:
        raise UserModelError(f"SPEC {spec!r}: {e}") from None
    except Exception as e:  # noqa: BLE001 - the user's file: say which and why
        raise UserModelError(f"SPEC {spec!r}: running {path} failed: {type(e).__name__}: {e}") from None
    try:
        dev = torch.device(device)
    except RuntimeError as e:
        raise UserModelError(f"SPEC {spec!r}: device {device!r}: {e}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise UserModelError(f"SPEC {spec!r}: device {device!r}, but torch sees no CUDA device here")
    try:
        with seeded(INIT_SEED), build_device(dev.type if dev.index is None else str(dev)):
            model = module.Model(*module.get_init_inputs())
        with seeded(INPUT_SEED):
            inputs = module.get_inputs()
    except Exception as e:  # noqa: BLE001 - the user's code: say which and why
        raise UserModelError(f"SPEC {spec!r}: building Model(*get_init_inputs()) or get_inputs() failed: "
                             f"{type(e).__name__}: {e}") from None
    if not isinstance(model, nn.Module):
        raise UserModelError(f"SPEC {spec!r}: Model(...) is a {type(model).__name__}, not a torch.nn.Module")
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    if not isinstance(inputs, (list, tuple)):
        raise UserModelError(f"SPEC {spec!r}: get_inputs() returned a {type(inputs).__name__}, not a list of tensors")
    bad = [i for i, x in enumerate(inputs) if not isinstance(x, torch.Tensor)]
    if bad:
        raise UserModelError(f"SPEC {spec!r}: get_inputs()[{bad[0]}] is a {type(inputs[bad[0]]).__name__}; "
                             "only tensors are supported as a model's inputs")
    try:
        return model.to(dev), tuple(x.to(dev) for x in inputs)
    except (RuntimeError, AssertionError) as e:
        raise UserModelError(f"SPEC {spec!r}: cannot move the model to device {device!r}: {e}") from None
