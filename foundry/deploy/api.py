"""`deploy(model, run_dir)`: the model with every region whose best kernel the run judged
correct and faster than eager swapped in.

The model is captured again the way extraction captured it (same method, on inputs drawn
like the manifest's example inputs, or on `example_inputs`), split by the same code, and
each region whose structure key has a deployable kernel gets a custom op
(foundry.deploy.region_op). Every kernel is checked against its region's original code on
the values the region sees in this capture before it goes in; one that differs is passed
over (and said so in `.foundry_deploy`), and so, with `check_speed` (the default), is one
that is not faster than the region's own code timed beside it in this process on those
values (foundry.deploy.speed: the run's speedup rests on an eager baseline timed once, at
another moment).

A region that is exactly one submodule's forward goes into a copy of the user's own model
that shares its tensors (foundry.deploy.module_swap): the rest of the model keeps running
the user's code. Where any region spans modules, the captured GraphModule with every
region replaced by its op is the other form. With `check_speed`, each form is timed beside
the original on the same inputs and the fastest comes back, or the original model where
none is faster (a kernel faster on its own can still lose in the model: the captured graph
runs ops the module did not, and each swapped region adds its launch); without it, the
form holding every kernel. Where nothing is swapped in, the original model comes back.
Either way the returned model's `foundry_deploy` says what happened. Gradients flow
through the regions' original code (foundry.deploy.region_op)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import torch
import torch.fx as fx
import torch.nn as nn

from foundry.deploy.kernel import load_kernel
from foundry.deploy.module_swap import exact_module, module_calls, module_site, share_clone, swap_forward
from foundry.deploy.region_op import RegionDispatch, dispatch_key, region_call, register_region_op, same_results
from foundry.deploy.rewrite import replace_region
from foundry.deploy.runinfo import read_run
from foundry.deploy.speed import SideBySide, time_model, time_region
from foundry.extract.capture import capture
from foundry.extract.errors import UserModelError
from foundry.extract.observe import observe
from foundry.extract.spec import check_runs, checked_model
from foundry.extract.split import Region, param_tensor, split
from foundry.extract.subgraph import region_arguments, region_module
from foundry.extract.values import make_tensor
from foundry.tasks.loader import load_task


@dataclass(frozen=True)
class DeployInfo:
    """What `deploy` did: `swapped`: (task id, module paths, op name) per occurrence;
    `passed_over`: (task id, why) per task or occurrence left as it was; `dispatches`: the
    RegionDispatch of each swapped occurrence (its kernel and fallback call counts)."""

    run_dir: str
    tasks_dir: str
    swapped: tuple
    passed_over: tuple
    dispatches: tuple
    speeds: tuple = ()  # (task id, module paths, SideBySide) per occurrence timed (check_speed)
    model_speed: SideBySide | None = None  # the rewritten model timed beside the original (check_speed)
    original_kept: str = ""  # why the original model came back instead of the rewritten one ("": it did not)
    form: str = ""  # FORM_MODULES or FORM_GRAPH: what the returned model is ("": the original)


FORM_MODULES = "modules"  # a copy of the user's model, swapped submodules' forwards running the kernels
FORM_GRAPH = "graph"  # the captured GraphModule, its regions replaced by custom-op calls


def example_inputs_of(manifest, device: str | None = None) -> tuple:
    """Fresh inputs drawn like the example inputs extraction recorded."""
    return tuple(make_tensor(info, device=device or manifest.device) for info in manifest.inputs)


def _occurrence_of(entry, region):
    for occ in entry.occurrences:
        if tuple(occ.nodes) == tuple(region.nodes):
            return occ
    for occ in entry.occurrences:
        if sorted(m for _, m in occ.param_map) == sorted(region.params) and region.params:
            return occ
    return None


def deploy(model: nn.Module, run_dir: str | Path, *, example_inputs=None,
           tasks_dir: str | Path | None = None, check_speed: bool = True) -> nn.Module:
    """The model with the run's kernels swapped in (a copy of it, or its captured
    GraphModule), or the original model where that would not be faster (see the module
    doc); `.foundry_deploy` of what comes back is a DeployInfo. Raises UserModelError for a run directory made for another model or a
    kernel whose shapes no longer match."""
    if not isinstance(model, nn.Module):
        raise UserModelError(f"deploy: the model must be a torch.nn.Module, got {type(model).__name__}")
    run = read_run(run_dir, model, tasks_dir=tasks_dir)
    manifest = run.manifest
    inputs = example_inputs if example_inputs is not None else example_inputs_of(manifest)
    model, inputs = checked_model(model, inputs, what="deploy")
    model.eval()
    check_runs(model, inputs, what="deploy")
    captured = capture(model, inputs, method=manifest.capture_method)
    gm = captured.graph_module
    obs = observe(gm, inputs)
    regions = split(gm, obs)
    entries = {r.key: r for r in manifest.regions}
    kernels = {k.task_id: k for k in run.kernels}
    passed = list(run.passed_over)
    chosen, speeds = [], []
    found = set()
    for region in regions:
        entry = entries.get(region.key)
        if entry is None:
            continue
        found.add(entry.task_id)
        best = kernels.get(entry.task_id)
        if best is None:
            continue
        if best.device != str(inputs[0].device).split(":")[0]:
            passed.append((entry.task_id, f"judged on {best.device}, the model runs on {inputs[0].device}"))
            continue
        occ = _occurrence_of(entry, region)
        if occ is None:
            passed.append((entry.task_id, f"occurrence at {', '.join(region.nodes)} is not in the manifest"))
            continue
        params = {t: param_tensor(gm, m) for t, m in occ.param_map}
        kernel = load_kernel(best.path, Path(run.tasks_dir) / entry.file, entry, params)
        fallback = region_module(gm, region)
        args = region_arguments(gm, region, obs.values)
        task = load_task(Path(run.tasks_dir) / entry.file, profile="full")
        why = same_results(kernel, fallback, args, len(region.inputs), atol=task.atol, rtol=task.rtol)
        if why is not None:
            passed.append((entry.task_id, f"kernel {best.path} at {', '.join(occ.modules)}: {why}"))
            continue
        dispatch = RegionDispatch(task_id=entry.task_id, fallback=fallback, n_activations=len(region.inputs),
                                  kernels={dispatch_key(args[:len(region.inputs)]): kernel})
        if check_speed:
            speed = time_region(dispatch, list(args), device=str(inputs[0].device))
            speeds.append((entry.task_id, tuple(occ.modules), speed))
            if not speed.faster:
                passed.append((entry.task_id, f"kernel {best.path} at {', '.join(occ.modules)}: not faster than "
                                              f"the region's own code here ({speed.swapped_ms:.4g} ms vs "
                                              f"{speed.original_ms:.4g} ms, timed side by side; the run judged "
                                              f"{best.speedup_eager:.3g}x)"))
                continue
        op = register_region_op(dispatch)
        chosen.append(Swap(region=region, call=region_call(op, dispatch), dispatch=dispatch,
                           path=exact_module(gm, region), fallback=fallback, args=tuple(args),
                           record=(entry.task_id, tuple(occ.modules), str(op))))
    for entry in manifest.regions:
        if entry.task_id in kernels and entry.task_id not in found:
            passed.append((entry.task_id, "its region is not in the model as captured now"))
    info = DeployInfo(run_dir=run.run_dir, tasks_dir=run.tasks_dir, swapped=(), passed_over=tuple(passed),
                      dispatches=(), speeds=tuple(speeds))
    if not chosen:
        return _original(model, info, "no kernel went in")
    forms = _forms(model, gm, chosen, inputs)
    if not check_speed:
        deployed, form, swaps = forms[0]
        return _deployed(deployed, info, form, swaps, chosen)
    timed = []
    for deployed, form, swaps in forms:
        speed = time_model(deployed, model, inputs, dispatches=[s.dispatch for s in swaps],
                           device=str(inputs[0].device))
        timed.append((speed, deployed, form, swaps))
    speed, deployed, form, swaps = max(timed, key=lambda t: t[0].speedup)  # each against its own original
    if not speed.faster:
        info = replace(info, swapped=tuple(s.record for s in chosen), model_speed=speed)
        return _original(model, info, f"the model with the kernels swapped in was not faster than the original "
                                      f"({speed.swapped_ms:.4g} ms vs {speed.original_ms:.4g} ms, timed side by "
                                      f"side)")
    return _deployed(deployed, replace(info, model_speed=speed), form, swaps, chosen)


@dataclass(frozen=True, eq=False)  # compared by identity: its fields hold tensors
class Swap:
    """One region occurrence going in: its region, the call standing for it, its dispatch,
    the submodule it may be exactly, its original code and values, its DeployInfo record."""

    region: Region
    call: Callable
    dispatch: RegionDispatch
    path: str | None  # the submodule the region is exactly (exact_module), else None
    fallback: fx.GraphModule  # the region's original code
    args: tuple  # the values it sees in the model
    record: tuple


def _forms(model: nn.Module, gm: fx.GraphModule, chosen: list, inputs: tuple) -> list:
    """The deployed models to choose from, as (model, form, swaps), the one with every
    swap first: the user's own modules (a copy sharing its tensors) with the module-exact
    swaps in, and, where any swap is not module-exact, the captured graph with all in."""
    forms = []
    calls = module_calls(model, {s.path for s in chosen if s.path}, inputs)
    sites = {id(s): module_site(s.path, calls[s.path], s.region, list(s.args), s.fallback)
             for s in chosen if s.path}
    exact = [s for s in chosen if sites.get(id(s)) is not None]
    if exact:
        own = share_clone(model)
        for s in exact:
            swap_forward(own, sites[id(s)], s.call, s.dispatch)
        forms.append((own, FORM_MODULES, exact))
    if len(exact) < len(chosen):
        renamed: dict = {}
        for s in chosen:
            replace_region(gm, s.region, s.call, renamed)
        gm.graph.lint()
        gm.recompile()
        forms.insert(0, (gm, FORM_GRAPH, chosen))
    return forms


def _deployed(deployed: nn.Module, info: DeployInfo, form: str, swaps: list, chosen: list) -> nn.Module:
    kept = {id(s) for s in swaps}
    left = [s for s in chosen if id(s) not in kept]
    passed = info.passed_over + tuple((task_id, f"not one submodule's forward, and the model with the other "
                                                f"kernels in its own modules was faster; at {', '.join(mods)}")
                                      for task_id, mods, _ in (s.record for s in left))
    deployed.foundry_deploy = replace(info, form=form, swapped=tuple(s.record for s in swaps),
                                      dispatches=tuple(s.dispatch for s in swaps), passed_over=passed)
    return deployed


def _original(model: nn.Module, info: DeployInfo, why: str) -> nn.Module:
    """The user's model itself, with `info` saying why nothing of the run is in it."""
    passed = info.passed_over + tuple((task_id, f"{why}; at {', '.join(modules) or '(model)'}")
                                      for task_id, modules, _ in info.swapped)
    model.foundry_deploy = replace(info, swapped=(), dispatches=(), passed_over=passed, original_kept=why)
    return model


def deployed_info(gm: torch.nn.Module) -> DeployInfo:
    info = getattr(gm, "foundry_deploy", None)
    if not isinstance(info, DeployInfo):
        raise UserModelError(f"{type(gm).__name__} was not made by foundry.deploy.deploy")
    return info
