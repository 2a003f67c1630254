"""The CUDA part of a seed: Inductor's Triton kernels and wrapper as a `triton` candidate.

`triton_seed(task, captures, codes)` writes the candidate from captures made on a GPU
(each with the configs Inductor's autotuner picked). `seed_from_output_code(task, code,
configs)` does the same from output code and configs saved elsewhere (a GPU run's
dump): the wrapper's arguments are matched to the model's tensors by a capture on this
machine's CPU at the same sizes (the compiled graph takes the same arguments in the same
order on any device), and checked against the sizes the output code asserts.
"""

from __future__ import annotations

import ast
import dataclasses

from foundry.seeds.candidate import BackendPart, RunMethod, assemble, forward_parameters
from foundry.seeds.capture import Capture, capture
from foundry.seeds.output_code import OutputCode, parse_output_code
from foundry.seeds.result import BACKEND_FOR_DEVICE, Seed, SeedError, no_seed
from foundry.seeds.triton_kernels import TritonKernel, TritonSeedError, launch_source, parse_triton_kernel
from foundry.seeds.wrapper import translate
from foundry.types import Task

HEADER_IMPORTS = ("import torch", "import torch.nn as nn", "import torch.nn.functional as F", "import triton",
                  "import triton.language as tl")


class OnlyLibraryCalls(TritonSeedError):
    """Inductor left the whole task to library calls (extern GEMM/convolution)."""


def _launch(kernels: dict, configs: dict, names: dict):
    def launch(call: ast.Call, kernel) -> str:
        tk: TritonKernel = kernels[kernel.name]
        if kernel.name not in configs:
            raise TritonSeedError(f"no chosen config for kernel {kernel.name!r} (configs name: "
                                  f"{', '.join(sorted(configs)) or 'none'})")
        config = configs[kernel.name]
        if isinstance(config, list):  # a dump of the launchers: one left once autotuned
            if len(config) != 1:
                raise TritonSeedError(f"kernel {kernel.name!r} has {len(config)} configs, not the one picked")
            config = config[0]
        missing = [c for c in tk.constexprs if c not in (config.get("kwargs") or {})]
        if missing:
            raise TritonSeedError(f"kernel {kernel.name!r}: its config gives no value for {missing}")
        text = launch_source(tk, call, config)
        return text.replace(tk.name + "[", names[tk.name] + "[", 1)

    return launch


def _renamed(source: str, old: str, new: str) -> str:
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == old:
            node.name = new
        elif isinstance(node, ast.Name) and node.id == old:
            node.id = new
    return ast.unparse(tree)


def _kernel_block(parsed: list[tuple[TritonKernel, str]]) -> tuple[list[str], str]:
    """(import lines, the kernels' source) for every (kernel, name in the candidate)."""
    imports: list[str] = list(HEADER_IMPORTS)
    helpers: dict[str, str] = {}
    parts = []
    for tk, name in parsed:
        imports += [i for i in tk.imports if i not in imports]
        source = tk.source if name == tk.name else _renamed(tk.source, tk.name, name)
        for hname, hsrc in tk.helpers:
            if helpers.get(hname, hsrc) != hsrc:  # same name, other body: this kernel's copy gets its own name
                new = f"{hname}_{name}"
                source = _renamed(source, hname, new)
                hname, hsrc = new, _renamed(hsrc, hname, new)
            if hname not in helpers:
                helpers[hname] = hsrc
                parts.append(hsrc)
        parts.append(f"# Inductor's {tk.heuristic} kernel {tk.name} (grid {tk.grid_type})\n{source}")
    return imports, "\n\n\n".join(parts)


def triton_seed(task: Task, captures: list[Capture], codes: list[OutputCode], *, origin: str = "") -> Seed:
    """The candidate from GPU captures (with their configs) and their parsed output code."""
    params = forward_parameters(task.source)
    parsed, runs = [], []
    for i, (cap, code) in enumerate(zip(captures, codes)):
        suffix = f"_s{i}" if len(codes) > 1 else ""
        kernels, names = {}, {}
        for k in code.kernels:
            if k.kind != "triton":
                raise TritonSeedError(f"kernel {k.name!r} is a {k.kind} kernel in a CUDA compile")
            kernels[k.name] = parse_triton_kernel(k.name, k.source)
            names[k.name] = k.name + suffix
            parsed.append((kernels[k.name], k.name + suffix))
        body = translate(code, launch=_launch(kernels, cap.configs, names), outputs=cap.outputs,
                         output_kind=cap.output_kind, input_names=params, graph_args=cap.args)
        runs.append(RunMethod(init_key=cap.init_args, input_key=cap.input_key, body=tuple(body)))
    if not parsed:
        raise OnlyLibraryCalls("Inductor generated no kernel of its own for this task (only library calls)")
    imports, block = _kernel_block(parsed)
    cap = captures[0]
    # the candidate's docstring: it names the compiler without the call's spelling (see seed.py)
    mode = "max-autotune Triton GEMM templates" if cap.gemm_templates else "default mode"
    where = origin or f"captured from torch's compiler (Inductor, {mode}, torch {cap.torch_version})"
    note = (f"Compiler seed (triton backend): Inductor's Triton kernels and wrapper for {task.task_id}, {where} "
            f"at {len(captures)} size set(s); {len(parsed)} @triton.jit kernel(s), each launched with the one "
            "config Inductor's autotuner picked; library GEMM/convolution left to torch as Inductor left them. "
            "Nothing here compiles or autotunes at run time.")
    part = BackendPart(header="\n".join(imports), kernels=block, init_lines=())
    src = assemble(task_source=task.source, note=note, part=part, runs=runs)
    return Seed(task_id=task.task_id, device="cuda", backend=BACKEND_FOR_DEVICE["cuda"], source=src,
                kernels=len(parsed),
                note=note, specializations=len(runs))


def _meta_shapes(task: Task, sizes: dict | None) -> tuple[str, tuple, dict]:
    """(init key, forward input key, {parameter name: size}) of the task at `sizes`, made
    on the meta device: no memory is allocated, whatever the sizes."""
    import torch

    from foundry.seeds.capture import INIT_SEED, input_key
    from foundry.tasks.inputs import make_init_inputs
    from foundry.tasks.loader import build_module

    module = build_module(task, sizes)
    init = make_init_inputs(module, INIT_SEED)
    with torch.device("meta"):
        model = module.Model(*init)
        inputs = list(module.get_inputs())
    named = dict(model.named_parameters(remove_duplicate=False))
    named.update(model.named_buffers(remove_duplicate=False))
    return repr(init), input_key(inputs), {k: tuple(v.shape) for k, v in named.items()}


def _asserted_sizes(code: OutputCode) -> dict:
    sizes = {}
    for text in code.body:
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "assert_size_stride" and \
                    isinstance(node.args[0], ast.Name) and node.args[0].id in code.arg_names:
                sizes[node.args[0].id] = tuple(ast.literal_eval(node.args[1]))
    return sizes


def _check_sizes(code: OutputCode, cap: Capture, params: dict) -> None:
    """The sizes the output code asserts for its arguments must be the task's at the sizes
    the seed is for (forward's inputs from `cap.input_key`, parameters from `params`)."""
    asserted = _asserted_sizes(code)
    for name, g in zip(code.arg_names, cap.args):
        if name not in asserted:
            continue
        if g.kind == "input":
            key = cap.input_key[g.index]
            have = tuple(key[0]) if isinstance(key, tuple) else None
        else:
            have = params.get(g.name)
        if have != asserted[name]:
            what = f"input {g.index}" if g.kind == "input" else repr(g.name)
            raise TritonSeedError(f"the output code expects {name} ({what}) of size {asserted[name]}, the task has "
                                  f"{have} at these sizes: the code was generated at other sizes or for another graph")


def seed_from_output_code(task: Task, code_text: str, configs: dict, *, sizes: dict | None = None,
                          mapping_sizes: dict | None = None, origin: str = "from saved output code") -> Seed:
    """A Triton seed from Inductor output code made at `sizes` (overrides of the task's
    constants; None: the task's own) and the configs its autotuner picked, saved elsewhere.
    The wrapper's arguments are matched to the model's tensors by a CPU capture at
    `mapping_sizes` (the graph takes the same arguments in the same order at any sizes;
    small ones keep the capture cheap), and every asserted size is checked against the
    task's at `sizes` (worked out on the meta device)."""
    try:
        code = parse_output_code(code_text)
        cpu = capture(task, device="cpu", overrides=mapping_sizes)
        if len(cpu.args) != len(code.arg_names):
            raise TritonSeedError(f"the output code's call() takes {len(code.arg_names)} arguments, the task's "
                                  f"graph {len(cpu.args)}: not the same graph")
        init_key, key, params = _meta_shapes(task, sizes)
        used = {k.name for k in code.kernels}
        cap = dataclasses.replace(cpu, device="cuda", code=code_text, init_args=init_key, input_key=key,
                                  overrides=tuple(sorted((sizes or {}).items())),
                                  configs={k: v for k, v in configs.items() if k in used})
        _check_sizes(code, cap, params)
        return triton_seed(task, [cap], [code], origin=origin)
    except SeedError as e:
        return no_seed(task.task_id, "cuda", str(e))
