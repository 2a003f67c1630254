"""Run torch.compile (Inductor, default mode) on a task's Model and keep what it made.

`capture(task, device=..., overrides=...)` builds the task's Model at the task's sizes
(plus `overrides`), compiles it with Inductor through a thin backend that calls
Inductor's own `compile_fx` and records the tensors each compiled graph is called with,
runs it once under `torch.no_grad()`, and returns a `Capture`: the output code Inductor
wrote (its `call(args)` wrapper and kernels), which model tensor each of the wrapper's
arguments is (a parameter or buffer by its dotted name, or a forward input by position),
and which wrapper output each model output is. Tensors are matched by identity, so the
argument order is the one Inductor's wrapper really receives.

This is the generator's side: it runs torch.compile here, never in a candidate.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from typing import Any

import torch

from foundry.seeds.result import SeedError
from foundry.tasks.inputs import InputSpec, make_init_inputs, make_inputs, seed_everything
from foundry.tasks.loader import build_module
from foundry.types import Task

INIT_SEED = 0


class CaptureError(SeedError):
    """torch.compile's result cannot become a seed; the message says why."""


class CaptureOutOfMemory(CaptureError):
    """torch.compile ran out of device memory at the task's sizes."""


@dataclass(frozen=True)
class GraphArg:
    """One argument of Inductor's `call(args)`: kind "param" (a parameter or buffer of the
    model; `name` its dotted name) or "input" (forward's positional input `index`)."""

    kind: str
    name: str = ""
    index: int = -1


@dataclass(frozen=True)
class Capture:
    """What torch.compile produced for one task at one set of sizes."""

    task_id: str
    device: str
    code: str  # Inductor's output code (the Python module with kernels and call(args))
    args: tuple  # GraphArg per argument of call(args), in order
    outputs: tuple  # per model output: ("graph", k) wrapper output k, or ("input", i)
    output_kind: str  # "tensor" (forward returns one tensor), "tuple" or "list"
    input_key: tuple  # the forward inputs it was compiled for (see input_key())
    init_args: str  # repr of the init inputs the model was built with
    overrides: tuple  # the size overrides on top of the task's profile, as sorted items
    threads: int
    torch_version: str
    gemm_templates: bool = False  # matmuls as Inductor's Triton templates (max-autotune)
    # Triton kernels (CUDA): the config Inductor's autotuner picked for each, by kernel name:
    # {"kwargs": {"XBLOCK": ...}, "num_warps": n, "num_stages": n}
    configs: dict = field(default_factory=dict)


def input_key(inputs) -> tuple:
    """What the compiled code was specialised on: each forward input's size, stride and
    dtype (tensors) or value (anything else)."""
    key = []
    for x in inputs:
        if isinstance(x, torch.Tensor):
            key.append((tuple(x.shape), tuple(x.stride()), str(x.dtype).replace("torch.", "")))
        else:
            key.append(repr(x))
    return tuple(key)


def _recording_backend(calls: list):
    from torch._inductor.compile_fx import compile_fx

    def backend(gm, example_inputs):
        compiled = compile_fx(gm, example_inputs)

        def run(*args):
            out = compiled(*args)
            calls.append((list(args), out))
            return out

        return run

    return backend


def _names(model: torch.nn.Module) -> dict[int, str]:
    named = list(model.named_parameters(remove_duplicate=False)) + list(model.named_buffers(remove_duplicate=False))
    names: dict[int, str] = {}
    for name, t in named:
        names.setdefault(id(t), name)
    return names


def _graph_args(args: list, model: torch.nn.Module, inputs: list) -> tuple:
    names = _names(model)
    position = {id(x): i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor)}
    out = []
    for k, a in enumerate(args):
        if not isinstance(a, torch.Tensor):
            raise CaptureError(f"argument {k} of the compiled graph is a {type(a).__name__}, not a tensor "
                               "(a dynamic size); seeds need static shapes")
        if id(a) in names:
            out.append(GraphArg("param", name=names[id(a)]))
        elif id(a) in position:
            out.append(GraphArg("input", index=position[id(a)]))
        else:
            raise CaptureError(f"argument {k} of the compiled graph (size {tuple(a.shape)}) is neither a "
                               "parameter, a buffer nor a forward input of the model")
    return tuple(out)


def _outputs(result: Any, graph_out: Any, inputs: list) -> tuple[tuple, str]:
    if isinstance(result, torch.Tensor):
        kind, leaves = "tensor", [result]
    elif isinstance(result, (tuple, list)) and all(isinstance(r, torch.Tensor) for r in result):
        kind, leaves = type(result).__name__, list(result)
    else:
        raise CaptureError(f"forward returns {type(result).__name__}; seeds handle a tensor or a tuple/list "
                           "of tensors")
    graph_ids = {id(t): k for k, t in enumerate(graph_out) if isinstance(t, torch.Tensor)}
    input_ids = {id(x): i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor)}
    mapped = []
    for j, r in enumerate(leaves):
        if id(r) in graph_ids:
            mapped.append(("graph", graph_ids[id(r)]))
        elif id(r) in input_ids:
            mapped.append(("input", input_ids[id(r)]))
        else:
            raise CaptureError(f"output {j} of forward is made outside the compiled graph (dynamo or "
                               "AOTAutograd rebuilt it); no seed")
    return tuple(mapped), kind


def picked_configs(code: str) -> dict:
    """The config each Triton kernel of `code` runs with, read from the autotuners of the
    output module Inductor loaded for it (after the first call: autotuned, one launcher)."""
    from torch._inductor.codecache import PyCodeCache

    modules = [m for m in PyCodeCache.modules if getattr(m, "__file__", None)]
    module = None
    for m in reversed(modules):
        try:
            with open(m.__file__) as f:
                if f.read() == code:
                    module = m
                    break
        except OSError:
            continue
    if module is None:  # the same kernels, in the module loaded last
        names = set(re.findall(r"^(\w+) = async_compile\.triton\(", code, re.M))
        module = next((m for m in reversed(modules) if names and names <= set(vars(m))), None)
    if module is None:
        raise CaptureError("the output module Inductor loaded for this graph was not found (to read the "
                           "configs its autotuner picked)")
    configs = {}
    for name, obj in vars(module).items():
        launchers = getattr(obj, "launchers", None)
        if not launchers:
            continue
        if len(launchers) != 1:
            raise CaptureError(f"kernel {name!r} still has {len(launchers)} configs after its first call")
        cfg = launchers[0].config
        configs[name] = {"kwargs": dict(cfg.kwargs), "num_warps": cfg.num_warps, "num_stages": cfg.num_stages}
    return configs


def gemm_template_options() -> dict:
    """Inductor settings under which its matmuls are its own Triton templates, the fastest of each autotuned at compile time, instead of library calls:
    max-autotune for GEMMs with Triton as the only backend (no K-split subgraphs, which
    would compile as graphs of their own)."""
    from torch._inductor import config as inductor_config

    options = {"max_autotune_gemm": True, "max_autotune_gemm_backends": "TRITON"}
    if hasattr(inductor_config.triton, "num_decompose_k_splits"):
        options["triton.num_decompose_k_splits"] = 0
    return options


@contextlib.contextmanager
def _threads(n: int):
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def capture(task: Task, *, device: str = "cpu", overrides: dict | None = None, threads: int = 1,
            gemm_templates: bool = False) -> Capture:
    """Compile the task's Model with Inductor at the task's sizes (and `overrides`) on
    `device` with `threads` CPU threads (`gemm_templates`: matmuls as Triton
    templates, see gemm_template_options); raises CaptureError when the result
    cannot be a seed (graph breaks, dynamic shapes, outputs made outside the graph)."""
    from torch._inductor import config as inductor_config
    from torch._inductor.utils import run_and_get_code

    if device not in ("cpu", "cuda"):
        raise ValueError(f"unknown device {device!r} for a compiler seed (choose cpu or cuda)")
    module = build_module(task, overrides)
    init = make_init_inputs(module, INIT_SEED)
    seed_everything(INIT_SEED)
    model = module.Model(*init).eval().to(device)
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x
              for x in make_inputs(module, InputSpec(INIT_SEED))]
    calls: list = []
    options = {"fx_graph_cache": False, **(gemm_template_options() if gemm_templates else {})}
    with _threads(threads), torch.no_grad(), inductor_config.patch(options):
        result, codes = run_and_get_code(torch.compile(model, backend=_recording_backend(calls)), *inputs)
    torch._dynamo.reset()
    if len(codes) != 1 or len(calls) != 1:
        raise CaptureError(f"torch.compile made {len(codes)} graph(s) ({len(calls)} call(s)); a seed needs "
                           "forward as one graph (no graph breaks)")
    args, graph_out = calls[0]
    outputs, kind = _outputs(result, graph_out, inputs)
    return Capture(task_id=task.task_id, device=device, code=codes[0], args=_graph_args(args, model, inputs),
                   outputs=outputs, output_kind=kind, input_key=input_key(inputs), init_args=repr(init),
                   overrides=tuple(sorted((overrides or {}).items())), threads=threads,
                   torch_version=torch.__version__, gemm_templates=gemm_templates,
                   configs=picked_configs(codes[0]) if device == "cuda" else {})
