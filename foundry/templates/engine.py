"""Task -> Description -> candidate source, for each backend; and coverage."""

from __future__ import annotations

import torch

from foundry.tasks.loader import build_module
from foundry.templates.recognize import NotCovered, describe
from foundry.types import Task

BACKENDS = ("c", "triton")


def reference_and_inputs(task: Task, *, seed: int = 0, device: str = "cpu"):
    """Build the task's Model (seeded) and one set of its inputs on `device` ("meta":
    shapes and dtypes only, no memory and no arithmetic)."""
    module = build_module(task)
    torch.manual_seed(seed)
    with torch.device(device):
        init = module.get_init_inputs()
        model = module.Model(*init).eval()  # as the judge runs it
        inputs = module.get_inputs()
    return model, list(init), list(inputs)


_CACHE: dict = {}


def _describe(task: Task):
    """Shapes are all a Description needs: trace on the meta device (a task at its
    published size costs nothing there), on the CPU where meta tensors do not run."""
    try:
        model, _, inputs = reference_and_inputs(task, device="meta")
        return describe(model, inputs)
    except NotCovered:
        raise
    except Exception:  # noqa: BLE001 - an op without a meta kernel, a value read, ...
        model, _, inputs = reference_and_inputs(task)
        return describe(model, inputs)


def describe_task(task: Task):
    """The task's Description (cached per task source and sizes); raises NotCovered."""
    key = (task.task_id, task.source_hash)
    if key not in _CACHE:
        try:
            _CACHE[key] = _describe(task)
        except NotCovered as e:
            _CACHE[key] = e
    hit = _CACHE[key]
    if isinstance(hit, NotCovered):
        raise hit
    return hit


def coverage(task: Task) -> str | None:
    """None when a template applies to `task`, else the reason none does."""
    try:
        describe_task(task)
    except NotCovered as e:
        return f"no template applies; needs an LLM ({e})"
    except Exception as e:  # noqa: BLE001 - the task itself failed to build/run
        return f"no template applies; needs an LLM (the reference failed: {type(e).__name__}: {e})"
    return None


def variants(task: Task, backend: str) -> tuple:
    """The templates that apply to `task` on `backend`, the one expected fastest first."""
    desc = describe_task(task)
    if backend == "triton":
        from foundry.templates.backend_triton import variants_for
        return variants_for(desc)
    from foundry.templates.backend_c import variants_for
    return variants_for(desc)


def emit(task: Task, *, backend: str, variant: str = "fused", unfused: tuple = (),
         params: dict | None = None, tunable: dict | None = None) -> str:
    """The candidate source of `task` for `backend` from template `variant`, with the
    epilogues of regions `unfused` split into their own kernels. The first line is the
    template marker (foundry.templates.mutate.TemplateState)."""
    from foundry.templates.mutate import TemplateState, split_epilogues
    if backend not in BACKENDS:
        raise ValueError(f"no templates for backend {backend!r} (choose from {', '.join(BACKENDS)})")
    desc = split_epilogues(describe_task(task), tuple(unfused))
    if backend == "c":
        from foundry.templates.backend_c import emit_c_candidate
        src = emit_c_candidate(desc=desc, task_source=task.source, params=params, tunable=tunable,
                                variant=variant)
    else:
        from foundry.templates.backend_triton import emit_triton_candidate
        src = emit_triton_candidate(desc=desc, task_source=task.source, params=params,
                                    tunable=tunable, variant=variant)
    marker = TemplateState(backend=backend, variant=variant, unfused=tuple(unfused)).marker()
    return marker + "\n" + src
