"""`extract(model, example_inputs, out=DIR)`: capture the forward, run it once on the
example inputs' device, split it into regions, merge repeated regions into one task,
time each region on its captured inputs, and write one KernelBench task per region plus
manifest.json (foundry.extract.manifest). The forward and the regions are timed in
interleaved rounds (foundry.extract.timing), so their ratios hold on a busy machine."""

from __future__ import annotations

import json
import re
from pathlib import Path

import torch.fx as fx
import torch.nn as nn

from foundry.extract.capture import capture
from foundry.extract.errors import UserModelError
from foundry.extract.inputscale import degeneracy_reason, unit_scaled
from foundry.extract.manifest import MANIFEST_FILE, Manifest, Occurrence, RegionEntry, fingerprint, write_manifest
from foundry.evaluate.movement_ops import MOVEMENT_OPS
from foundry.extract.observe import observe, with_values
from foundry.extract.opkinds import op_name
from foundry.extract.split import Region, param_tensor, split
from foundry.extract.subgraph import region_arguments, region_module
from foundry.extract.taskcheck import check_task
from foundry.extract.taskgen import SPELLINGS, NotExpressible, TaskSource, write_task_source
from foundry.extract.spec import check_runs, checked_model
from foundry.extract.timing import interleaved_median_ms
from foundry.extract.values import TensorInfo

MIN_SHARE = 0.005  # the CLI's default min_share: regions below this share of the forward time get no task


def module_path(node: fx.Node) -> str:
    """The module a node sits in: the innermost entry of its nn_module_stack (export), the
    leaf module it calls (fx), else "" (the model itself)."""
    stack = node.meta.get("nn_module_stack") or {}
    paths = [v[0] for v in stack.values() if isinstance(v, tuple) and v and isinstance(v[0], str)]
    paths = [p for p in paths if not p.startswith("_")]
    if paths:
        return paths[-1]
    if node.op == "call_module":
        return str(node.target)
    return ""


def untaken_ops(gm: fx.GraphModule, regions: tuple) -> list[str]:
    """The names of the compute ops of the forward that no region holds (views, copies,
    random fills, tuple items and other movement left out), in graph order."""
    modules = dict(gm.named_modules())
    held = {n for r in regions for n in r.nodes}
    out: list[str] = []
    for n in gm.graph.nodes:
        if n.name in held or n.op not in ("call_function", "call_method", "call_module"):
            continue
        if n.op == "call_module" and str(n.target).startswith("_"):
            continue  # export's own guard module
        name = op_name(n, modules)
        if name and name not in MOVEMENT_OPS and name != "getitem" and not name.startswith("sym_") \
                and name not in out:
            out.append(name)
    return out


def _untaken_note(gm: fx.GraphModule, regions: tuple) -> str:
    ops = untaken_ops(gm, regions)
    if not ops:
        return ""
    return (f"; ops outside every region: {', '.join(ops[:8])}{', ...' if len(ops) > 8 else ''} "
            "(extraction makes no task of these)")


def group_regions(regions: tuple) -> list[list[Region]]:
    """Regions with equal structure keys, grouped, in graph order of first occurrence."""
    groups: dict[str, list[Region]] = {}
    for r in regions:
        groups.setdefault(r.key, []).append(r)
    return list(groups.values())


def _region_call(gm, region: Region, obs):
    """A call of the region's own code on its captured inputs (what its time share is measured on)."""
    sub = region_module(gm, region)
    args = region_arguments(gm, region, obs.values)
    return lambda: sub(*args)


def _task_id(index: int, label: str) -> str:
    return f"{index:02d}_" + re.sub(r"[^A-Za-z0-9_]", "_", label)


def _doc(model: nn.Module, label: str, occurrences: list[Region], modules: list, device: str) -> str:
    where = "; ".join(", ".join(m) or "(model)" for m in modules[:6]) + ("; ..." if len(modules) > 6 else "")
    return (f"Region {label} of {type(model).__name__} ({len(occurrences)} occurrence(s): {where}), "
            f"captured on {device} by foundry.extract.")


def _write_task(folder: Path, task_id: str, gm, region: Region, obs, doc: str, device: str):
    """Write the task file in the first spelling that reproduces the region; returns
    (TaskSource, None) or (None, why none did)."""
    args = region_arguments(gm, region, obs.values)
    inputs = args[:len(region.inputs)]
    expected = tuple(obs.values[o] for o in region.outputs)
    path = folder / f"{task_id}.py"
    reasons = []
    for spelling in SPELLINGS:
        try:
            src = write_task_source(gm, region, obs, spelling=spelling, doc=doc)
        except NotExpressible as e:
            reasons.append(f"{spelling}: {e}")
            continue
        path.write_text(src.source)
        params = {t: param_tensor(gm, m) for t, m in src.param_map}
        why = check_task(path, params, inputs, expected)
        if why is None:
            return _judgeable(path, src, gm, region, obs, doc, device), None
        reasons.append(f"{spelling}: {why}")
    path.unlink(missing_ok=True)
    return None, "; ".join(reasons)


def _judgeable(path: Path, src: TaskSource, gm, region: Region, obs, doc: str, device: str) -> TaskSource:
    """`src` (written at `path`), or, where the judge would refuse it as degenerate and
    drawing its small inputs at unit magnitude mends that, the task so drawn, written there."""
    if degeneracy_reason(path, device=device) is None:
        return src
    scaled = unit_scaled(obs, region)
    if scaled is None:
        return src
    scaled_obs, factor = scaled
    note = (f" Its inputs are drawn at up to {factor:.3g}x their captured scale: at that scale its output "
            "hardly depends on them, and the judge would refuse the task as degenerate.")
    rescaled = write_task_source(gm, region, scaled_obs, spelling=src.spelling, doc=doc + note)
    path.write_text(rescaled.source)
    if degeneracy_reason(path, device=device) is None:
        return rescaled
    path.write_text(src.source)
    return src


def clear_folder(folder: Path) -> None:
    """Make `folder` ready for a new extraction: the task files a previous extraction wrote
    there (listed in its manifest.json) are removed, since the main job would take every
    task file in the folder as a task. Raises UserModelError, before removing anything,
    when other Python files are there (they would be run as tasks too)."""
    folder.mkdir(parents=True, exist_ok=True)
    old = folder / MANIFEST_FILE
    ours: set = set()
    if old.is_file():
        try:
            ours = {r["file"] for r in json.loads(old.read_text()).get("regions", ())}
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise UserModelError(f"--out {folder}: its {MANIFEST_FILE} is not one foundry.extract wrote ({e}); "
                                 "choose another folder") from None
    others = sorted(p.name for p in folder.glob("*.py") if p.name not in ours)
    if others:
        raise UserModelError(f"--out {folder} holds Python files not written by its last foundry.extract "
                             f"({', '.join(others[:5])}{', ...' if len(others) > 5 else ''}); the main job would "
                             "take them as tasks too: choose an empty folder")
    for name in ours:
        if Path(name).name == name and name.endswith(".py"):
            (folder / name).unlink(missing_ok=True)
    old.unlink(missing_ok=True)


def extract(model: nn.Module, example_inputs, out: str | Path, *, spec: str | None = None,
            method: str | None = None, min_share: float = 0.0) -> Manifest:
    """Write the tasks of `model` on `example_inputs` into folder `out` and return its
    manifest. `method` forces the capture ("export" or "fx"; None: export, then fx).
    Regions whose calls take less than `min_share` of the measured forward time get no
    task (the manifest lists them as skipped): a search on them could not pay. Shares are
    measured, so on a busy machine a region near the threshold may fall either side."""
    if not 0.0 <= min_share < 1.0:
        raise UserModelError(f"min_share={min_share!r}: give a fraction of the forward time in [0, 1)")
    model, inputs = checked_model(model, example_inputs, what=spec and f"SPEC {spec!r}" or "the model")
    model.eval()
    check_runs(model, inputs, what=spec and f"SPEC {spec!r}" or "the model")
    device = str(inputs[0].device)
    captured = capture(model, inputs, method=method)
    gm = captured.graph_module
    obs = observe(gm, inputs)
    regions = split(gm, obs)
    if not regions:
        raise UserModelError(f"{type(model).__name__}: its forward holds no matmul, convolution, attention, norm, "
                             "recurrent layer or pointwise/reduction op worth a kernel"
                             + _untaken_note(gm, regions))
    folder = Path(out)
    clear_folder(folder)
    groups = group_regions(regions)
    # the tensors the written tasks and their timing read: each group's first region's inputs and outputs
    obs = with_values(gm, inputs, {n for g in groups for n in (*g[0].inputs, *g[0].outputs)}, obs)
    forward_ms, *region_ms = interleaved_median_ms(  # as inside the forward: calls queued back to back
        [lambda: model(*inputs)] + [_region_call(gm, g[0], obs) for g in groups], device=device, back_to_back=True)
    by_name = {n.name: n for n in gm.graph.nodes}
    entries, skipped = [], []
    for group, time_ms in zip(groups, region_ms):
        first = group[0]
        share = len(group) * time_ms / forward_ms
        if share < min_share:
            skipped.append({"label": first.label, "nodes": list(first.nodes), "count": len(group),
                            "reason": f"{share:.2%} of the forward time, below min_share={min_share:g}"})
            continue
        modules = [tuple(dict.fromkeys(module_path(by_name[n]) for n in r.nodes)) for r in group]
        task_id = _task_id(len(entries) + 1, first.label)
        doc = _doc(model, first.label, group, modules, device)
        src, why = _write_task(folder, task_id, gm, first, obs, doc, device)
        if src is None:
            skipped.append({"label": first.label, "nodes": list(first.nodes), "count": len(group), "reason": why})
            continue
        occurrences = []
        for r, mods in zip(group, modules):
            path_of = dict(zip(first.params, r.params))  # the same structure: parameters correspond by position
            occurrences.append(Occurrence(nodes=r.nodes, modules=mods,
                                          param_map=tuple((t, path_of[m]) for t, m in src.param_map)))
        entries.append(RegionEntry(
            task_id=task_id, file=f"{task_id}.py", key=first.key, label=first.label, count=len(group),
            time_ms=time_ms, share=share, spelling=src.spelling,
            inputs=tuple(obs.infos[n].signature() for n in first.inputs),
            params=tuple({"name": t, "shape": list(param_tensor(gm, m).shape),
                          "dtype": str(param_tensor(gm, m).dtype).replace("torch.", "")} for t, m in src.param_map),
            outputs=tuple(obs.infos[n].signature() for n in first.outputs),
            occurrences=tuple(occurrences)))
    if not entries:
        why = "; ".join(f"{s['label']} ({s['count']} call(s)): {s['reason']}" for s in skipped[:4])
        raise UserModelError(f"{type(model).__name__}: no task written, every region was skipped: {why}"
                             + ("; ..." if len(skipped) > 4 else "") + _untaken_note(gm, regions)
                             + ". A region below min_share is kept with a lower --min-share (0 keeps all)")
    manifest = Manifest(model_class=type(model).__name__, fingerprint=fingerprint(model), spec=spec,
                        device=device, forward_ms=forward_ms, capture_method=captured.method,
                        export_error=captured.export_error, dynamic=captured.dynamic,
                        inputs=tuple(TensorInfo.of(x) for x in inputs), regions=tuple(entries),
                        skipped=tuple(skipped))
    write_manifest(folder, manifest)
    return manifest
