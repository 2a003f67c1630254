"""`deploy(model, run_dir)`: the fastest of the user's model, torch.compile of it, the
model with the run's kernels swapped in and torch.compile of that, measured end to end.

The model is captured again the way extraction captured it (same method, on inputs drawn
like the manifest's example inputs, or on `example_inputs`), split by the same code, and
each region whose structure key has a kernel the run judged correct and faster than eager
gets a custom op (foundry.deploy.region_op; with a fake implementation, so torch.compile
traces it without a graph break and Inductor compiles the rest of the graph around it).
Every kernel is checked against its region's original code on the values the region sees
in this capture before it goes in, by the judge's comparison and with TF32 off as in the
judge; one that differs is passed over (and said so in `.foundry_deploy`).

A region that is exactly one submodule's forward goes into a copy of the user's own model
that shares its tensors (foundry.deploy.module_swap): the rest of the model keeps running
the user's code. Where any region spans modules, a copy of the captured GraphModule with
every region replaced by its op is the other form, unless the model's forward rebinds its
tensor attributes (a recurrent cell's `self.hidden = ...`), which a captured graph drops
(foundry.deploy.state): then only the regions that are one submodule's forward go in.

With `check_speed` (the default) the choice is the whole model's (foundry.deploy.choose):
a region stays in only where the model with it beats the model without it, each in its
fastest form, eager or compiled (`with_compile`; on a GPU also with CUDA graphs); then the
original, torch.compile of it and the deployed forms are timed together, interleaved, and
the fastest comes back, whichever it is (`.foundry_deploy.returned` names it). Without
`check_speed`, the form holding every kernel, eager. Where nothing is swapped in, the
original model comes back. Either way the returned model's `foundry_deploy` says what
happened. Gradients flow through the regions' original code (foundry.deploy.region_op)."""


from __future__ import annotations

import copy
import time
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import torch
import torch.fx as fx
import torch.nn as nn

from foundry.deploy.choose import CONFIRM_MIN_GAIN, choose
from foundry.deploy.contenders import EAGER, compile_modes
from foundry.deploy.elimination import Unit
from foundry.deploy.kernel import load_kernel
from foundry.deploy.module_swap import exact_module, module_calls, module_site, share_clone, swap_forward
from foundry.deploy.region_op import RegionDispatch, dispatch_key, region_call, register_region_op, same_results
from foundry.deploy.rewrite import replace_region
from foundry.deploy.runinfo import read_run
from foundry.deploy.speed import SideBySide
from foundry.deploy.state import rebound_by_forward
from foundry.extract.capture import capture
from foundry.extract.errors import UserModelError
from foundry.extract.observe import observe, with_values
from foundry.extract.spec import check_runs, checked_model
from foundry.extract.split import Region, param_tensor, split
from foundry.extract.subgraph import region_arguments, region_module
from foundry.extract.values import make_tensor
from foundry.tasks.loader import load_task


@dataclass(frozen=True)
class DeployInfo:
    """What `deploy` did: `swapped`: (task id, module paths, op name, the strategy that made
    its kernel: "template:conv", "compiler:inductor", ...) per occurrence;
    `passed_over`: (task id, why) per task or occurrence left as it was, occurrences left
    for the same reason at the same modules (a loop calling one module) said once with
    their count; `dispatches`: the RegionDispatch of each swapped occurrence (its kernel
    and fallback call counts)."""

    run_dir: str
    tasks_dir: str
    swapped: tuple
    passed_over: tuple
    dispatches: tuple
    model_speed: SideBySide | None = None  # the returned model timed beside the eager original (check_speed)
    original_kept: str = ""  # why the original model (or torch.compile of it) came back ("": it did not)
    form: str = ""  # FORM_MODULES or FORM_GRAPH: what the returned model is ("": the original)
    compiled: str = ""  # how it is compiled: "" (eager), "default" (torch.compile) or "reduce-overhead"
    returned: str = ""  # the returned model's name: "original", "torch.compile(deployed (graph))", ...
    timings: tuple = ()  # (name, ms) of every model timed end to end in the final round (check_speed)
    # (name, ms) of the deployed winner of that round and of the original's fastest form, timed again
    confirmation: tuple = ()
    untried: tuple = ()  # task id per occurrence kept without a try of its own (elimination_s spent)
    # (task id, module paths, the strategy of the run's best kernel, the strategy whose kernel went
    # in instead, why) per occurrence where a runner-up made the model faster
    replaced: tuple = ()


ELIMINATION_S = 300.0  # each try compiles the model: bounded on models with dozens of regions
PROGRESS_EVERY_S = 20.0  # while kernels load, a progress line at most this often
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
           tasks_dir: str | Path | None = None, check_speed: bool = True, with_compile: bool = True,
           elimination_s: float | None = ELIMINATION_S, progress: Callable[[str], None] | None = None) -> nn.Module:
    """The fastest of the model with the run's kernels swapped in (a copy of it, or its
    captured GraphModule), the original model and, with `with_compile`, torch.compile of
    either (see the module doc); `.foundry_deploy` of what comes back is a DeployInfo.
    `elimination_s` bounds the one-region-at-a-time tries (foundry.deploy.choose; None: no
    bound). `progress` is told each step as it ends, a line each (None: nothing is said).
    Raises UserModelError for a run directory made for another model or a kernel whose
    shapes no longer match."""
    if not isinstance(model, nn.Module):
        raise UserModelError(f"deploy: the model must be a torch.nn.Module, got {type(model).__name__}")
    started = time.monotonic()
    say = progress or (lambda line: None)
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
    # the inputs of the regions the manifest has (what a kernel is checked against its region on)
    obs = with_values(gm, inputs, {n for r in regions if r.key in entries for n in r.inputs}, obs)
    kernels = {k.task_id: (k,) + runners_up for k, runners_up in run.by_task()}
    device_type = str(inputs[0].device).split(":")[0]
    passed = list(run.passed_over)
    chosen = []
    found = set()
    with_kernels = [r for r in regions if r.key in entries and entries[r.key].task_id in kernels]
    say(f"captured {type(model).__name__}: {len(regions)} region(s), {len(with_kernels)} with a kernel of the run; "
        f"loading and checking those kernels ({time.monotonic() - started:.0f} s)")
    told = time.monotonic()
    for n, region in enumerate(regions):
        if time.monotonic() - told > PROGRESS_EVERY_S:
            told = time.monotonic()
            say(f"loading and checking kernels: region {n + 1} of {len(regions)} ({told - started:.0f} s)")
        entry = entries.get(region.key)
        if entry is None:
            continue
        found.add(entry.task_id)
        if entry.task_id not in kernels:
            continue
        occ = _occurrence_of(entry, region)
        if occ is None:
            passed.append((entry.task_id, f"occurrence at {', '.join(region.nodes)} is not in the manifest"))
            continue
        fallback = region_module(gm, region)
        args = region_arguments(gm, region, obs.values)
        task_file = Path(run.tasks_dir) / entry.file
        task = load_task(task_file, profile="full")
        params = {t: param_tensor(gm, m) for t, m in occ.param_map}
        swaps = []
        for found_kernel in kernels[entry.task_id]:
            if found_kernel.device != device_type:
                passed.append((entry.task_id, f"kernel {found_kernel.path} was judged on {found_kernel.device}, "
                                              f"the model runs on {inputs[0].device}"))
                continue
            kernel = load_kernel(found_kernel, task_file, entry, params)
            why = same_results(kernel, fallback, args, len(region.inputs), atol=task.atol, rtol=task.rtol)
            if why is not None:
                passed.append((entry.task_id, f"kernel {found_kernel.path} at {', '.join(occ.modules)}: {why}"))
                continue
            dispatch = RegionDispatch(task_id=entry.task_id, fallback=fallback, n_activations=len(region.inputs),
                                      kernels={dispatch_key(args[:len(region.inputs)]): kernel})
            ops = register_region_op(dispatch)
            swaps.append(Swap(region=region, call=region_call(ops, dispatch), dispatch=dispatch,
                              path=exact_module(gm, region), fallback=fallback, args=tuple(args),
                              record=(entry.task_id, tuple(occ.modules), str(ops.with_grad), found_kernel.strategy),
                              judged=found_kernel.speedup_over_faster))
        if swaps:
            chosen.append(replace(swaps[0], alternatives=tuple(swaps[1:])))
    for entry in manifest.regions:
        if entry.task_id in kernels and entry.task_id not in found:
            passed.append((entry.task_id, "its region is not in the model as captured now"))
    calls = module_calls(model, {s.path for s in chosen if s.path}, inputs)
    sites = {id(s): module_site(s.path, calls[s.path], s.region, list(s.args), s.fallback)
             for s in chosen if s.path}
    sites.update({id(alt): sites.get(id(s)) for s in chosen for alt in s.alternatives})  # the same region
    rebound = rebound_by_forward(model, inputs) if chosen else ()
    if rebound:  # the captured graph would not rebind them: only the user's own forward, swapped, goes
        passed += [(s.record[0], f"not one submodule's forward, and the model's forward rebinds "
                                 f"{', '.join(rebound)}, which its captured graph does not; at "
                                 f"{', '.join(s.record[1])}") for s in chosen if sites.get(id(s)) is None]
        chosen = [s for s in chosen if sites.get(id(s)) is not None]
    info = DeployInfo(run_dir=run.run_dir, tasks_dir=run.tasks_dir, swapped=(), passed_over=tuple(passed),
                      dispatches=())
    say(f"{len(chosen)} region occurrence(s) can take a kernel ({time.monotonic() - started:.0f} s)")
    if not chosen:
        return _original(model, info, "no kernel went in")

    def build(swaps: list) -> list:
        return _forms(model, gm, swaps, sites)

    if not check_speed:
        deployed, form, swaps = build(chosen)[0]
        return _deployed(deployed, info, form, EAGER, swaps, chosen)
    device = str(inputs[0].device)
    weakest_first = sorted(_units(chosen), key=lambda u: u.swaps[0].judged)
    choice = choose(model, build, weakest_first, inputs, device=device, modes=compile_modes(device, with_compile),
                    dispatches=[d.dispatch for s in chosen for d in (s, *s.alternatives)], elimination_s=elimination_s,
                    progress=say)
    winner = choice.winner
    passed = info.passed_over + tuple((s.record[0], f"kernel ({s.record[3]}) at {', '.join(s.record[1]) or '(model)'}:"
                                                    f" {why}") for s, why in choice.dropped)
    info = replace(info, passed_over=passed, timings=choice.timings, confirmation=choice.confirmation,
                   returned=winner.name, untried=tuple(s.record[0] for s in choice.untried),
                   replaced=tuple((s.record[0], s.record[1], s.record[3], alt.record[3], why)
                                  for s, alt, why in choice.replaced),
                   model_speed=SideBySide(swapped_ms=dict(choice.timings)[winner.name],
                                          original_ms=choice.original_ms))
    if not winner.form:
        info = replace(info, swapped=tuple(s.record for s in choice.kept))
        figures = ", ".join(f"{name} {ms:.4g} ms" for name, ms in choice.timings)
        why = f"{winner.name} was the fastest, timed side by side: {figures}"
        if choice.confirmation:
            (lost, lost_ms), (_, won_ms) = choice.confirmation
            why = (f"{lost}, which had won the first timing ({figures}), was not {CONFIRM_MIN_GAIN:.0%} faster than "
                   f"{winner.name} when the two were timed again: {lost_ms:.4g} ms against {won_ms:.4g} ms")
        return _original(winner.model, info, why, winner.compiled)
    return _deployed(winner.model, info, winner.form, winner.compiled, list(winner.swaps), list(choice.kept))


@dataclass(frozen=True, eq=False)  # compared by identity: its fields hold tensors
class Swap:
    """One region occurrence going in: its region, the call standing for it, its dispatch,
    the submodule it may be exactly, its original code and values, its DeployInfo record,
    and the same region with the task's other kernels."""

    region: Region
    call: Callable
    dispatch: RegionDispatch
    path: str | None  # the submodule the region is exactly (exact_module), else None
    fallback: fx.GraphModule  # the region's original code
    args: tuple  # the values it sees in the model
    record: tuple  # (task id, module paths, op name, the kernel's strategy): DeployInfo.swapped's entry
    judged: float  # the run's speedup for its task over the faster of eager and torch.compile (BestKernel)
    alternatives: tuple = ()  # Swaps of the same region running the task's runners-up (runinfo), to try instead


def _units(chosen: list) -> list[Unit]:
    """The swaps grouped by task (every occurrence of a task, with its best kernel), each
    with the runner-up kernels every one of those occurrences has (by strategy)."""
    by_task: dict[str, list] = {}
    for s in chosen:
        by_task.setdefault(s.record[0], []).append(s)
    units = []
    for swaps in by_task.values():
        strategies = [alt.record[3] for alt in swaps[0].alternatives]
        alternatives = []
        for strategy in strategies:
            alt = tuple(next((a for a in s.alternatives if a.record[3] == strategy), None) for s in swaps)
            if all(a is not None for a in alt):
                alternatives.append(alt)
        first = swaps[0].record
        units.append(Unit(swaps=tuple(swaps), alternatives=tuple(alternatives), label=f"{first[0]} ({first[3]})"))
    return units


def _forms(model: nn.Module, gm: fx.GraphModule, chosen: list, sites: dict) -> list:
    """The deployed models holding the swaps `chosen`, as (model, form, swaps), the one with
    every swap first: the user's own modules (a copy sharing its tensors) with the
    module-exact swaps in (`sites`: module_site by id of swap), and, where any swap is not
    module-exact, a copy of the captured graph (sharing its tensors) with all in."""
    forms = []
    exact = [s for s in chosen if sites.get(id(s)) is not None]
    if exact:
        own = share_clone(model)
        for s in exact:
            swap_forward(own, sites[id(s)], s.call, s.dispatch)
        forms.append((own, FORM_MODULES, exact))
    if len(exact) < len(chosen):
        graph = fx.GraphModule(gm, copy.deepcopy(gm.graph))  # node names kept, submodules and tensors shared
        renamed: dict = {}
        for s in chosen:
            replace_region(graph, s.region, s.call, renamed)
        graph.graph.lint()
        graph.recompile()
        forms.insert(0, (graph, FORM_GRAPH, chosen))
    return forms


def said_once(passed) -> tuple:
    """`passed` (task id, why) in order, each pair said once: a pair that comes again
    (a module a loop calls, left out at every call for the same reason) gets its count."""
    counts = Counter(tuple(pair) for pair in passed)
    return tuple((task_id, why if n == 1 else f"{why} ({n} occurrences)") for (task_id, why), n in counts.items())


def _deployed(deployed: nn.Module, info: DeployInfo, form: str, compiled: str, swaps: list,
              chosen: list) -> nn.Module:
    kept = {id(s) for s in swaps}
    left = [s for s in chosen if id(s) not in kept]
    passed = info.passed_over + tuple((task_id, f"not one submodule's forward, and the model with the other "
                                                f"kernels in its own modules was faster; at {', '.join(mods)}")
                                      for task_id, mods, *_ in (s.record for s in left))
    deployed.foundry_deploy = replace(info, form=form, compiled=compiled, swapped=tuple(s.record for s in swaps),
                                      dispatches=tuple(s.dispatch for s in swaps), passed_over=said_once(passed),
                                      returned=info.returned or f"deployed ({form})")
    return deployed


def _original(model: nn.Module, info: DeployInfo, why: str, compiled: str = EAGER) -> nn.Module:
    """The user's model itself (or torch.compile of it: the attribute goes through to the
    model), with `info` saying why nothing of the run is in it."""
    passed = info.passed_over + tuple((task_id, f"{why}; at {', '.join(modules) or '(model)'}")
                                      for task_id, modules, *_ in info.swapped)
    model.foundry_deploy = replace(info, swapped=(), dispatches=(), passed_over=said_once(passed), original_kept=why,
                                   compiled=compiled, returned=info.returned or "original")
    return model


def deployed_info(gm: torch.nn.Module) -> DeployInfo:
    info = getattr(gm, "foundry_deploy", None)
    if not isinstance(info, DeployInfo):
        raise UserModelError(f"{type(gm).__name__} was not made by foundry.deploy.deploy")
    return info
