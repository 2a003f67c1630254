"""A trial's inputs, generated where the trial runs.

The judge and the sandbox worker call `make_trial_inputs` with the same seed and get
bit-identical inputs in separate processes:

- cpu: `foundry.tasks.inputs.make_inputs` (the task's `get_inputs()` under the seed, the
  heavy-tailed rescaling from a CPU generator), unchanged;
- cuda: the task's `get_inputs()` runs under ``torch.device("cuda")`` after
  ``torch.manual_seed`` (which seeds every CUDA generator), so its factory calls draw from
  the device's Philox generator, and the heavy-tailed factor exp(1.5 |z|) comes from a
  seeded device ``torch.Generator``. Nothing full-size is built on the host or copied
  over PCIe: a 512 MiB input takes milliseconds instead of seconds. A task whose
  `get_inputs()` cannot run under a device default (e.g. it passes its own CPU generator)
  is generated on the CPU and moved, the same way in both processes.
"""

from __future__ import annotations

from typing import Any

import torch

from foundry.evaluate.job import TrialSpec
from foundry.tasks.inputs import HEAVY_SCALE, InputSpec, make_inputs, seed_everything, seeded, with_redraw


def _heavy_on_device(x: torch.Tensor, seed: int) -> torch.Tensor:
    gen = torch.Generator(device=x.device)
    gen.manual_seed(seed ^ 0x5EED)
    z = torch.randn(x.shape, generator=gen, dtype=torch.float32, device=x.device)
    z.abs_().mul_(HEAVY_SCALE).exp_()
    if x.dtype == torch.float32:
        return z.mul_(x)
    return z.mul_(x.float()).to(x.dtype)


def make_trial_inputs(module: Any, spec: InputSpec, device: str) -> list:
    """The inputs of one trial, on `device` ("cpu" or "cuda")."""
    if device == "cpu":
        return make_inputs(module, spec)
    target = torch.device(device, torch.cuda.current_device()) if device == "cuda" else torch.device(device)
    return generate_on(module, spec, target)


def generate_on(module: Any, spec: InputSpec, target: torch.device) -> list:
    """`get_inputs()` under `spec`'s seed with `target` as the default device, then the
    heavy-tailed factor from a generator on `target` (the device path of
    `make_trial_inputs`; any device works, which is how it is tested without a GPU).
    A spec's redraw is applied the same way as on the CPU (`with_redraw`)."""
    return with_redraw(spec, lambda s: _generate_on(module, s, target))


def trial_input_spec(trial: TrialSpec) -> InputSpec:
    """The inputs of a job's trial, as the worker and the judge's reference both build them."""
    return InputSpec(trial.seed, trial.distribution, trial.redraw, trial.redraw_seed)


def _generate_on(module: Any, spec: InputSpec, target: torch.device) -> list:
    with seeded(spec.seed):
        try:
            with target:
                inputs = list(module.get_inputs())
        except (RuntimeError, TypeError):  # e.g. a CPU generator passed to a factory: build on the CPU
            seed_everything(spec.seed)
            inputs = list(module.get_inputs())
    inputs = [x.to(target) if isinstance(x, torch.Tensor) else x for x in inputs]
    if spec.distribution == "heavy":
        inputs = [_heavy_on_device(x, spec.seed + i) if isinstance(x, torch.Tensor) and x.is_floating_point()
                  else x for i, x in enumerate(inputs)]
    return inputs


def tensor_bytes(obj: Any) -> int:
    """Total bytes of the tensors in a value (tensor, or list/tuple/dict of them)."""
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, (list, tuple)):
        return sum(tensor_bytes(o) for o in obj)
    if isinstance(obj, dict):
        return sum(tensor_bytes(o) for o in obj.values())
    return 0


NOT_LITERAL = object()  # a module-level name assigned something `ast.literal_eval` cannot read


def declared_literal(source: str, name: str) -> tuple[bool, Any]:
    """(True, value) for a module-level `name = <literal>` in a task file's `source`,
    (True, NOT_LITERAL) when `name` is assigned anything else, (False, None) when it is
    not assigned. Read with `ast`: the file is never run."""
    import ast
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False, None
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == name):
            try:
                return True, ast.literal_eval(node.value)
            except ValueError:
                return True, NOT_LITERAL
    return False, None


def small_sizes(task: Any) -> dict:
    """The task file's SMALL_SIZES (a literal dict), or {} when it declares none."""
    _, value = declared_literal(task.source, "SMALL_SIZES")
    return dict(value) if isinstance(value, dict) else {}
