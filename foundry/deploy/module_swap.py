"""Deploying into the user's own model: where a region is exactly one submodule's forward
(every node the capture put in that submodule is the region's, its call takes the region's
activations and gives its outputs), that submodule's forward is swapped for the region's
kernel in a copy of the model that shares its tensors. The rest of the model runs the
user's code as it was, not the captured graph: that graph pays its own host cost on every
call (attribute reads, pytree handling, the aten op lookups), which on a GPU is enough to
make a model with a faster kernel in it slower than the original.

A swapped forward runs the kernel only for the dispatch key it was judged on, in plain
eager inference; under torch.compile, torch.export or autograd it calls the region's
custom op (foundry.deploy.region_op); any other call (other shapes, keyword arguments)
runs the submodule's own forward."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.fx as fx
import torch.nn as nn

from foundry.deploy.region_op import RegionDispatch, dispatch_key
from foundry.evaluate.compare import compare
from foundry.extract.api import module_path
from foundry.extract.split import Region


@dataclass(frozen=True)
class ModuleSite:
    """A submodule whose forward is exactly one region."""

    path: str  # of the submodule in the model
    param_names: tuple  # the region's parameters, by their names inside the submodule
    single_output: bool  # the forward returns a tensor (else a tuple of the region's outputs)


def _common_module(paths: set) -> str:
    parts = [p.split(".") for p in paths]
    common = []
    for names in zip(*parts):
        if len(set(names)) != 1:
            break
        common.append(names[0])
    return ".".join(common)


def _inside(path: str, module: str) -> bool:
    return path == module or path.startswith(module + ".")


def exact_module(gm: fx.GraphModule, region: Region) -> str | None:
    """The innermost submodule holding all of `region`'s nodes, when the capture put no
    other computing node in it; else None (the region spans or shares modules)."""
    by_name = {n.name: n for n in gm.graph.nodes}
    paths = {module_path(by_name[n]) for n in region.nodes}
    if "" in paths:
        return None
    module = _common_module(paths)
    if not module:
        return None
    members = set(region.nodes)
    for node in gm.graph.nodes:
        if node.op == "call_module" and str(node.target).startswith("_"):
            continue  # the capture's own helpers (torch.export's input guards)
        if node.op in ("call_function", "call_method", "call_module") and node.name not in members \
                and _inside(module_path(node), module):
            return None
    return module


def _matches(got, want) -> bool:
    return (isinstance(got, torch.Tensor) and isinstance(want, torch.Tensor)
            and compare(want, got, atol=None, rtol=None).ok)


def module_calls(model: nn.Module, paths, inputs: tuple) -> dict:
    """{path: [(args, kwargs, output), ...]}: every call of each submodule in `paths` during
    one forward of `model` on `inputs`."""
    calls: dict = {p: [] for p in paths}
    handles = []
    try:
        for path in calls:
            try:
                module = model.get_submodule(path)
            except AttributeError:
                continue
            handles.append(module.register_forward_hook(
                lambda m, a, kw, out, seen=calls[path]: seen.append((a, kw, out)), with_kwargs=True))
        with torch.no_grad():
            model(*inputs)
    finally:
        for h in handles:
            h.remove()
    return calls


def module_site(path: str, calls: list, region: Region, args: list, fallback: fx.GraphModule) -> ModuleSite | None:
    """The site where submodule `path`, called as `calls` record (module_calls), is called
    once per forward with the region's activations `args[:n]` as its only arguments and
    returns the region's outputs (as `fallback` computes them on `args`); else None."""
    names = []
    for p in region.params:
        if not p.startswith(path + "."):
            return None
        names.append(p[len(path) + 1:])
    if len(calls) != 1:
        return None
    call_args, kwargs, out = calls[0]
    acts = args[:len(region.inputs)]
    if kwargs or len(call_args) != len(acts) or not all(_matches(a, b) for a, b in zip(call_args, acts)):
        return None
    with torch.no_grad():
        want = list(fallback(*args))
    got = [out] if isinstance(out, torch.Tensor) else list(out) if isinstance(out, tuple) else None
    if got is None or len(got) != len(want) or not all(_matches(g, w) for g, w in zip(got, want)):
        return None
    return ModuleSite(path=path, param_names=tuple(names), single_output=isinstance(out, torch.Tensor))


def share_clone(model: nn.Module) -> nn.Module:
    """A copy of the module tree that shares every parameter and buffer (its own dicts of
    them, so swapping a submodule in the copy leaves the original as it is; the tensors
    are the same, so changing them in one, by `.to()` say, changes them in both)."""
    memo: dict = {}

    def clone(m: nn.Module) -> nn.Module:
        if id(m) in memo:
            return memo[id(m)]
        c = m.__class__.__new__(m.__class__)
        # its own dicts of parameters, buffers and hooks (the same tensors and hook functions)
        c.__dict__ = {k: (v.copy() if isinstance(v, dict) and k.startswith("_") else v) for k, v in m.__dict__.items()}
        memo[id(m)] = c
        c._modules = {k: (clone(v) if v is not None else None) for k, v in m._modules.items()}
        return c

    return clone(model)


def swap_forward(root: nn.Module, site: ModuleSite, call, dispatch: RegionDispatch) -> None:
    """Give submodule `site.path` of `root` a forward that runs `call` (region_op.region_call)
    on calls with the dispatch key `dispatch` was judged on, its own forward otherwise."""
    module = root.get_submodule(site.path)
    own_forward = type(module).forward
    n = dispatch.n_activations

    def forward(self, *args, **kwargs):
        if kwargs or len(args) != n or not all(isinstance(a, torch.Tensor) for a in args) \
                or dispatch_key(args) not in dispatch.kernels:
            dispatch.fallback_calls += 1
            return own_forward(self, *args, **kwargs)
        params = [_tensor(self, p) for p in site.param_names]
        outs = call(list(args) + params)
        return outs[0] if site.single_output else tuple(outs)

    cls = type(module)
    module.__class__ = type(f"Deployed{cls.__name__}", (cls,), {"forward": forward, "__module__": cls.__module__})


def _tensor(module: nn.Module, dotted: str) -> torch.Tensor:
    """The parameter or buffer `dotted` of `module`, as it is now (after a `.to()`, say)."""
    owner, _, name = dotted.rpartition(".")
    sub = module.get_submodule(owner) if owner else module
    return sub._parameters[name] if name in sub._parameters else sub._buffers[name]
