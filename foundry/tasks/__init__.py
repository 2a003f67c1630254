"""Task loading: KernelBench-format files, size profiles, suites."""

from foundry.tasks.loader import PROFILES, TaskError, build_module, load_task, task_id_for

__all__ = ["PROFILES", "TaskError", "build_module", "load_task", "task_id_for"]
