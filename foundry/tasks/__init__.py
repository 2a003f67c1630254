"""Task loading: KernelBench-format files, size profiles, seeded inputs."""

from foundry.tasks.inputs import DISTRIBUTIONS, InputSpec, make_init_inputs, make_inputs, trial_plan
from foundry.tasks.loader import PROFILES, TaskError, build_module, load_task, task_id_for

__all__ = ["DISTRIBUTIONS", "InputSpec", "PROFILES", "TaskError", "build_module", "load_task",
           "make_init_inputs", "make_inputs", "task_id_for", "trial_plan"]
