"""A run's kernel (its best file, or a runner-up's runnable source) as a module ready to
run inside the user's model: `ModelNew` built with its task's init inputs (its tuned PARAMS
are in the source), holding the model's own parameters (shared, not copied) under the
task's parameter names."""

from __future__ import annotations

import linecache
import sys
import types
from pathlib import Path

import torch
import torch.nn as nn

from foundry.deploy.runinfo import BestKernel
from foundry.extract.errors import UserModelError
from foundry.extract.manifest import RegionEntry
from foundry.extract.values import TensorInfo
from foundry.tasks.inputs import seeded
from foundry.tasks.loader import build_module, load_task

INIT_SEED = 0


def _exec(source: str, where: str, name: str) -> types.ModuleType:
    """`source` run as module `name`; `where` is its file name in tracebacks and, for source
    that is in no file (a runner-up's), in linecache, so that `inspect.getsource` finds it
    (Triton's JIT reads its functions' source that way)."""
    if not Path(where).is_file():
        linecache.cache[where] = (len(source), None, source.splitlines(keepends=True), where)
    module = types.ModuleType(name)
    module.__file__ = where
    sys.modules[name] = module
    exec(compile(source, where, "exec"), module.__dict__)
    return module


def check_task_shapes(task_file: Path, region: RegionEntry) -> None:
    """The task file's inputs have the shapes and dtypes the manifest recorded."""
    module = build_module(load_task(task_file, profile="full"))
    with seeded(INIT_SEED):
        inputs = list(module.get_inputs())
    got = [TensorInfo.of(x).signature() if isinstance(x, torch.Tensor) else repr(x) for x in inputs]
    if got != [dict(s) for s in region.inputs]:
        raise UserModelError(f"task {task_file}: its inputs are {got}, but the model's region "
                             f"{region.task_id} takes {list(region.inputs)}: the kernel's shapes no longer match")


def load_kernel(found: BestKernel, task_file: str | Path, region: RegionEntry,
                params: dict[str, torch.Tensor]) -> nn.Module:
    """`ModelNew` of the kernel `found` in eval mode, its parameters `params` (task path ->
    the model's tensor, assigned, so they stay the model's)."""
    task_file = Path(task_file)
    check_task_shapes(task_file, region)
    task_module = build_module(load_task(task_file, profile="full"))
    kernel_module = _exec(found.source, found.path, "foundry_deployed_" + found.candidate_id)
    cls = getattr(kernel_module, "ModelNew", None)
    if cls is None:
        raise UserModelError(f"kernel {found.path} defines no ModelNew")
    with seeded(INIT_SEED):
        kernel = cls(*task_module.get_init_inputs()).eval()
    state = kernel.state_dict()
    for name, value in params.items():
        if name not in state:
            raise UserModelError(f"kernel {found.path}: has no parameter {name!r} (it has "
                                 f"{', '.join(sorted(state)) or 'none'}), so the model's parameters cannot go in")
        if tuple(state[name].shape) != tuple(value.shape) or state[name].dtype != value.dtype:
            raise UserModelError(f"kernel {found.path}: parameter {name!r} is {tuple(state[name].shape)} "
                                 f"{state[name].dtype}, the model's is {tuple(value.shape)} {value.dtype}: "
                                 "the kernel's shapes no longer match")
    kernel.load_state_dict(params, strict=False, assign=True)
    return kernel
