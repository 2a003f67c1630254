"""How much memory a task's evaluation needs, known before anything is allocated.

The task's inputs and outputs are sized on the meta device (shapes and dtypes only), so
a task too large for the device or the host fails at its first evaluation with a message
naming the task and its sizes, instead of an out-of-memory error deep in a worker.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from foundry.evaluate.job_plan import TIMING_SETS
from foundry.evaluate.trial_inputs import tensor_bytes
from foundry.tasks.loader import build_module
from foundry.types import Task

GB = 1e9


class TaskTooLarge(RuntimeError):
    """The task's evaluation cannot fit in the memory the judge has."""


@dataclass(frozen=True)
class TaskSize:
    input_bytes: int  # one trial's inputs
    output_bytes: int  # one trial's outputs
    param_bytes: int = 0  # one model's parameters and buffers

    def evaluation_bytes(self, *, full_trials: int, timing_sets: int) -> int:
        """Peak bytes of one evaluation: the worker's largest holding
        (every trial's inputs, built before the candidate loads, the first trial's output
        and that trial's inputs made again from their seed to check the forward left them
        unchanged; or, once each trial's inputs are let go after its check, the timing
        sets' inputs and their last outputs, with one output more being made beside them:
        a set's last output is let go only once its next one exists, so that a forward
        never gets its own last output's memory back), or, once the worker has exited, the judge's
        reference outputs of every trial, one trial's inputs and one output more for the
        forward's own intermediates; plus the outputs the judge has received (every
        trial's, the repeat's and the timed runs'). On a CPU the worker checks a digest
        instead of a second copy of the inputs, so there that copy is slack."""
        worker = max(self.input_bytes * (full_trials + 1) + self.output_bytes,
                     (self.input_bytes + self.output_bytes) * timing_sets + self.output_bytes)
        references = self.input_bytes + self.output_bytes * (full_trials + 1)
        received = self.output_bytes * (full_trials + 1 + timing_sets)
        return max(worker, references) + received + 2 * self.param_bytes  # the candidate's model and the reference's

    def screen_bytes(self, *, points: int = 1) -> int:
        """Peak bytes of one screen of `points` TUNABLE settings: the judge's reference
        output and its copy of one setting's output, and the worker's trial inputs with
        that setting's output (one output at a time), or its one timing set's inputs and
        timed output; plus the reference's model and every setting's (all are kept until
        they are timed)."""
        return self.input_bytes + 3 * self.output_bytes + (1 + max(1, int(points))) * self.param_bytes

    def degeneracy_bytes(self, *, trials: int = 3) -> int:
        """Peak bytes of the task's degeneracy check in the judge: the reference's model
        and, at first, one input set, every set's output and one input-independent answer;
        later (the input swaps), the first set's output, two input sets and a swapped
        output; plus one output more for the forward's own intermediates."""
        first = self.input_bytes + (int(trials) + 1) * self.output_bytes
        swaps = 2 * self.input_bytes + 2 * self.output_bytes
        return self.param_bytes + max(first, swaps) + self.output_bytes


def timing_sets_that_fit(size: TaskSize, *, full_trials: int, capacity_bytes: int) -> int:
    """How many input sets an evaluation times: TIMING_SETS, at most one per full-size
    trial, or one where the evaluation would not fit `capacity_bytes` (the device memory
    the judge's lanes share; 0: no limit) with more. One set loses nothing at these sizes:
    a set of GBs leaves nothing in the L2 cache between calls, and its inputs change
    between timed calls anyway (the harness's x/2, x/4, ...)."""
    sets = max(1, min(TIMING_SETS, int(full_trials)))
    if capacity_bytes and size.evaluation_bytes(full_trials=full_trials, timing_sets=sets) > capacity_bytes:
        return 1
    return sets


def model_bytes(model) -> int:
    """Bytes of a model's parameters and buffers."""
    return sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()))


def meta_size(task: Task) -> TaskSize | None:
    """The task's per-trial data sizes from a forward on meta tensors; None when its
    forward does not run there (it is then sized by a real forward)."""
    try:
        module = build_module(task)
        with torch.device("meta"), torch.no_grad():
            model = module.Model(*module.get_init_inputs())
            inputs = list(module.get_inputs())
            out = model(*inputs)
        return TaskSize(tensor_bytes(inputs), tensor_bytes(out), model_bytes(model))
    except Exception:  # noqa: BLE001 - data-dependent shapes, ops without meta kernels, ...
        return None


def check_fits(task: Task, size: TaskSize, *, available_bytes: int, where: str, full_trials: int,
               timing_sets: int) -> None:
    """Raise TaskTooLarge, naming the task and its sizes, when one evaluation needs more
    than `available_bytes` of `where` ("GPU memory", "host memory")."""
    need = size.evaluation_bytes(full_trials=full_trials, timing_sets=timing_sets)
    if available_bytes and need > available_bytes:
        raise TaskTooLarge(
            f"task {task.task_id} is too large for this judge: one trial's inputs are "
            f"{size.input_bytes / GB:.2f} GB and its outputs {size.output_bytes / GB:.2f} GB; an evaluation "
            f"({full_trials} full-size trials, {timing_sets} timing sets) needs about {need / GB:.1f} GB of "
            f"{where}, {available_bytes / GB:.1f} GB is there. Give the task smaller sizes "
            f"(SMALL_SIZES with tasks.profile=small) or fewer trials (evaluator.full_size_trials).")


def available_bytes(device: str) -> int:
    """Total memory of the judge's CUDA device, or the host's available memory (0 when
    unknown)."""
    if device == "cuda":
        try:
            return int(torch.cuda.mem_get_info()[1])
        except Exception:  # noqa: BLE001
            return 0
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0
