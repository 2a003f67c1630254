"""Reference outputs, computed in the judge's own process from the same seeds the worker
got. They are computed only after the candidate's worker has been killed, so they never
exist anywhere while candidate code runs. Inputs are generated on the judge's device
(foundry.evaluate.trial_inputs) and outputs stay there: on CUDA the comparison runs on
the GPU against the candidate's outputs, which were copied device-to-device. A heavy-tailed
trial the candidate missed can be computed again in float64 (`precise_output`,
verdict.check_trials)."""

from __future__ import annotations

import json
from typing import Any

import torch

from foundry.evaluate.job import Job
from foundry.evaluate.trial_inputs import make_trial_inputs, tensor_bytes, trial_input_spec
from foundry.tasks.inputs import InputSpec, build_device, make_init_inputs, seeded
from foundry.tasks.loader import build_module
from foundry.types import Task


class ReferenceRunner:
    """Builds task modules (cached per task and overrides) and runs `Model`."""

    def __init__(self, device: Any):
        self.device = device
        self._modules: dict[tuple, Any] = {}

    def module(self, task: Task, overrides: dict) -> Any:
        key = (task.source_hash, task.path, json.dumps(overrides, sort_keys=True, default=str))
        if key not in self._modules:
            if len(self._modules) > 64:
                self._modules.clear()
            self._modules[key] = build_module(task, overrides)
        return self._modules[key]

    def model(self, task: Task, overrides: dict, init_seed: int) -> torch.nn.Module:
        module = self.module(task, overrides)
        init = make_init_inputs(module, init_seed)
        # parameters drawn from the global generators (one lane at a time), where the workers draw theirs
        with seeded(init_seed), build_device(self.device.name):
            model = module.Model(*init)
        model.eval()
        return self.device.to_device(model)

    def outputs(self, model: torch.nn.Module, task: Task, overrides: dict, spec: InputSpec,
                *, scale: float = 1.0, sizes: dict | None = None) -> Any:
        """The reference's output; `scale`: on the inputs with every floating-point tensor
        multiplied by it (as the worker's timing changes them before each block)."""
        inputs = make_trial_inputs(self.module(task, overrides), spec, self.device.name)
        if scale != 1.0:
            inputs = [x * scale if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                      for x in inputs]
        inputs = [self.device.to_device(x) for x in inputs]
        if sizes is not None:
            sizes["input_bytes"] = tensor_bytes(inputs)
        with torch.no_grad():
            out = model(*inputs)
        del inputs
        self.device.synchronize()
        return out if self.device.name != "cpu" else _to_cpu(out)

    def job_outputs(self, task: Task, job: Job, indices, *, scale: float = 1.0) -> dict[int, Any]:
        """The reference's outputs for the job's trials `indices` (one model per variant,
        from the job's init seed), computed in the judge's own process."""
        models: dict[int, Any] = {}
        outputs: dict[int, Any] = {}
        for i in indices:
            t = job.trials[i]
            overrides = job.variants[t.variant]
            if t.variant not in models:
                models[t.variant] = self.model(task, overrides, job.init_seed)
            outputs[i] = self.outputs(models[t.variant], task, overrides, trial_input_spec(t), scale=scale)
        return outputs

    def precise_output(self, task: Task, job: Job, i: int, like: Any, *, scale: float = 1.0) -> Any | None:
        """Trial `i`'s reference output computed in float64 (the model's floating-point
        parameters and buffers and the inputs' floating-point tensors, times `scale`), cast
        to the dtypes of `like` (the reference's own output): what the model computes when
        float32 rounding is out of the way. None where the model does not run in float64
        (an op without a float64 kernel, a float32 tensor made in its forward), or the
        device has no room for it: the float32 reference then stands alone."""
        t = job.trials[i]
        overrides = job.variants[t.variant]
        try:
            inputs = make_trial_inputs(self.module(task, overrides), trial_input_spec(t), self.device.name)
            # the float64 inputs beside these and the float64 output: where the device lacks the
            # room, the copies would crowd the other lanes' workers out of it
            if not self._room_for(3 * tensor_bytes(inputs) + 2 * tensor_bytes(like)):
                return None
            model = self.model(task, overrides, job.init_seed).to(torch.float64)
            inputs = [self.device.to_device(x.to(torch.float64) * scale if _floating(x) else x) for x in inputs]
            with torch.no_grad():
                out = model(*inputs)
            del inputs, model
            self.device.synchronize()
            return cast_like(out if self.device.name != "cpu" else _to_cpu(out), like)
        except Exception:  # noqa: BLE001 - no float64 reference: the float32 one stands alone
            return None

    def _room_for(self, nbytes: int) -> bool:
        """Whether the device has `nbytes` free (on a GPU, by the driver's count; a CPU's
        memory is the host's, which the judge's cap covers)."""
        if self.device.name == "cpu":
            return True
        free, _ = torch.cuda.mem_get_info()
        return nbytes <= free


def _floating(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.is_floating_point()


def cast_like(obj: Any, like: Any) -> Any:
    """`obj` with each tensor cast to the dtype of the tensor at the same place in `like`;
    ValueError where their structures differ."""
    if isinstance(like, torch.Tensor) and isinstance(obj, torch.Tensor):
        return obj.to(like.dtype)
    if isinstance(like, (list, tuple)) and isinstance(obj, (list, tuple)) and len(obj) == len(like):
        return type(like)(cast_like(o, k) for o, k in zip(obj, like))
    if isinstance(like, dict) and isinstance(obj, dict) and obj.keys() == like.keys():
        return {k: cast_like(obj[k], like[k]) for k in like}
    if isinstance(like, (torch.Tensor, list, tuple, dict)) or isinstance(obj, (torch.Tensor, list, tuple, dict)):
        raise ValueError(f"the float64 output's structure ({type(obj).__name__}) differs from the reference's "
                         f"({type(like).__name__})")
    return obj


def _to_cpu(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_cpu(o) for o in obj)
    if isinstance(obj, dict):
        return {k: _to_cpu(v) for k, v in obj.items()}
    return obj


def output_dtype(obj: Any) -> torch.dtype | None:
    if isinstance(obj, torch.Tensor):
        return obj.dtype
    if isinstance(obj, (list, tuple)):
        for o in obj:
            d = output_dtype(o)
            if d is not None:
                return d
    return None
