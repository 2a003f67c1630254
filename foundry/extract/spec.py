"""A SPEC names a Python callable `module.path:function` (or `path/to/file.py:function`)
that returns `(model, example_inputs)`, or is a KernelBench task file `path/to/task.py`
(`Model`, `get_inputs`, `get_init_inputs`: the model is `Model(*get_init_inputs())`, the
inputs `get_inputs()`, built the way the judge builds a task: seeded, on the device, at the
file's sizes; foundry.extract.kernelbench_spec). `load_spec` imports and calls it and
checks what comes back, and `check_runs` that the model runs on its inputs."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn

from foundry.extract.errors import UserModelError


def _import(module_name: str, spec: str):
    if module_name.endswith(".py") or "/" in module_name:
        path = Path(module_name).expanduser().resolve()
        if not path.is_file():
            raise UserModelError(f"SPEC {spec!r}: no file {path}")
        name = "foundry_user_model_" + path.stem
        loader_spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[name] = module
        try:
            loader_spec.loader.exec_module(module)  # type: ignore[union-attr]
        except Exception as e:  # noqa: BLE001 - the user's file: say which and why
            raise UserModelError(f"SPEC {spec!r}: running {path} failed: {type(e).__name__}: {e}") from None
        return module
    if str(Path.cwd()) not in sys.path and "" not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name and (module_name == e.name or module_name.startswith(e.name + ".")):
            raise UserModelError(f"SPEC {spec!r}: no module named {e.name!r} (run from the folder that holds it, "
                                 "or give a file path: path/to/file.py:function)") from None
        raise UserModelError(f"SPEC {spec!r}: importing {module_name!r} failed: {e}") from None
    except Exception as e:  # noqa: BLE001 - a syntax error, a failing import inside it, ...
        raise UserModelError(f"SPEC {spec!r}: importing {module_name!r} failed: {type(e).__name__}: {e}") from None


def is_task_file(spec: str) -> bool:
    """Whether `spec` names a task file (`path/to/task.py`, no `:function`)."""
    return isinstance(spec, str) and ":" not in spec and spec.endswith(".py")


def load_spec(spec: str, *, device: str | None = None, sizes: str = "full",
              overrides: dict | None = None) -> tuple[nn.Module, tuple]:
    """Import the module of `spec` (`module.path:function`), call the function and return
    `(model, example_inputs)` with the inputs as a tuple, on `device` where one is given
    (else where the function put them); for a task file, its Model and inputs at `sizes`
    ("full" or "small": its SMALL_SIZES; `overrides`: module constants set after those),
    built on `device` (default cpu). Raises
    UserModelError naming what is missing or wrong."""
    if is_task_file(spec):
        from foundry.extract.kernelbench_spec import load_task_spec
        model, inputs = load_task_spec(spec, device=device or "cpu", sizes=sizes, overrides=overrides)
        return checked_model(model, inputs, what=f"SPEC {spec!r}")
    if not isinstance(spec, str) or spec.count(":") != 1 or not all(spec.split(":")):
        raise UserModelError(f"SPEC {spec!r} is not of the form module.path:function or path/to/task.py")
    if overrides:
        raise UserModelError(f"SPEC {spec!r}: size constants ({', '.join(overrides)}) apply to a task file only")
    module_name, attr = spec.split(":")
    module = _import(module_name, spec)
    fn = getattr(module, attr, None)
    if fn is None:
        raise UserModelError(f"SPEC {spec!r}: module {module_name!r} has no attribute {attr!r}")
    if not callable(fn):
        raise UserModelError(f"SPEC {spec!r}: {attr!r} is a {type(fn).__name__}, not a callable")
    try:
        got = fn()
    except Exception as e:  # noqa: BLE001 - the user's function: say which and why
        raise UserModelError(f"SPEC {spec!r}: {attr}() raised {type(e).__name__}: {e}") from None
    if not (isinstance(got, (tuple, list)) and len(got) == 2):
        raise UserModelError(f"SPEC {spec!r}: {attr}() must return (model, example_inputs), "
                             f"got {type(got).__name__}")
    model, inputs = checked_model(*got, what=f"SPEC {spec!r}")
    if device is not None:
        model, inputs = on_device(model, inputs, device, what=f"SPEC {spec!r}")
    return model, inputs


def size_overrides(items: list[str]) -> dict:
    """`["batch_size=2", "dims=[4, 8]"]` (the CLIs' --set) as {name: Python literal}."""
    out = {}
    for item in items or ():
        name, eq, text = item.partition("=")
        if not eq or not name.strip().isidentifier():
            raise UserModelError(f"--set {item!r}: give NAME=VALUE, VALUE a Python literal")
        try:
            out[name.strip()] = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError):
            raise UserModelError(f"--set {item!r}: {text.strip()!r} is not a Python literal") from None
    return out


def on_device(model: nn.Module, inputs: tuple, device: str, *, what: str) -> tuple[nn.Module, tuple]:
    """The model and its inputs moved to `device`; UserModelError where there is no such device."""
    try:
        dev = torch.device(device)
        return model.to(dev), tuple(x.to(dev) for x in inputs)
    except (RuntimeError, AssertionError) as e:  # an unknown device string, or no such device here
        raise UserModelError(f"{what}: cannot move the model to device {device!r}: {e}") from None


def checked_model(model: Any, inputs: Any, *, what: str = "the model") -> tuple[nn.Module, tuple]:
    """`(model, inputs)` with inputs as a tuple, after checking their types."""
    if not isinstance(model, nn.Module):
        raise UserModelError(f"{what}: the model must be a torch.nn.Module, got {type(model).__name__}")
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    if not isinstance(inputs, (tuple, list)) or not inputs:
        raise UserModelError(f"{what}: example_inputs must be a non-empty tuple of tensors, got "
                             f"{type(inputs).__name__}")
    bad = [i for i, x in enumerate(inputs) if not isinstance(x, torch.Tensor)]
    if bad:
        raise UserModelError(f"{what}: example input {bad[0]} is a {type(inputs[bad[0]]).__name__}; "
                             "only tensors are supported as inputs")
    return model, tuple(inputs)


def check_runs(model: nn.Module, inputs: tuple, *, what: str = "the model") -> Any:
    """Run the model once on its inputs (no grad) and return the output; raises
    UserModelError with the model's own error when it does not run."""
    try:
        with torch.no_grad():
            return model(*inputs)
    except Exception as e:  # noqa: BLE001 - any failure of the user's code is reported as such
        shapes = ", ".join(f"{tuple(x.shape)} {str(x.dtype).replace('torch.', '')}" for x in inputs)
        raise UserModelError(f"{what}: {type(model).__name__} does not run on its example inputs ({shapes}): "
                             f"{type(e).__name__}: {e}") from None
