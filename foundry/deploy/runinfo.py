"""What deployment reads from a run directory: the tasks folder it ran on (`tasks.path`
in the run's config.yaml, or one given), that folder's manifest.json (which must be the
deployed model's: same parameter fingerprint), and per task the best kernel the run
judged correct and faster than eager or than torch.compile of its task (`best/<task>.py`;
on a GPU, faster by the judged times or by CUDA-event time alone),
and its runners-up: the best such kernel of each other strategy that made one (a template
family, the compiler seed, the LLM), at most RUNNERS_UP, the fastest first. Which of them go
in is decided end to end, in the model (foundry.deploy.choose): the kernel fastest alone is
not always the one fastest inside the model, where the compiler fuses around a region."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch.nn as nn

from foundry.evaluate.baselines import positive_figure
from foundry.extract.errors import UserModelError
from foundry.extract.manifest import MANIFEST_FILE, Manifest, fingerprint, read_manifest
from foundry.store.evallog import read_evaluations
from foundry.store.rundir import RunDir
from foundry.store.best import runnable_source
from foundry.store.evallog import EvaluationRecord
from foundry.store.summary import best_record, speedups, task_baselines
from foundry.types import EvalResult

RUNNERS_UP = 2  # kernels of other strategies kept per task beside its best


@dataclass(frozen=True)
class BestKernel:
    """A deployable kernel of a task: `path` is best/<task>.py for the task's best, else
    where it was found ("<run>/evaluations, candidate <id>"); `source` is its runnable text."""

    task_id: str
    path: str
    candidate_id: str
    speedup_eager: float
    speedup_compile: float | None
    device: str  # the device the run judged it on ("cpu", "cuda")
    source: str = ""
    strategy: str = ""  # what made it: "template:conv", "compiler:inductor", ...
    # on a GPU, the same speedups by CUDA-event times alone (the result's metrics["gpu_speedup"])
    gpu_speedup_eager: float | None = None
    gpu_speedup_compile: float | None = None

    @property
    def speedup_over_faster(self) -> float:
        """Its speedup over the faster of its task's eager and torch.compile forms (over eager
        where the run has no torch.compile figure). A kernel must beat both to speed up a
        model in any form: on a GPU under CUDA graphs the host cost that torch.compile of a
        small region pays is gone, and a kernel 1.8x faster than that but 0.4x of eager's
        GPU time only slows the model down (EfficientNetB0's conv + BatchNorm regions). For
        the same reason, where the run has them, the speedups by CUDA-event time are the
        ones taken: a small region's judged time is mostly the host's launch cost
        (MobileNetV1's depthwise regions on an H100: a kernel judged at 0.087 ms a call ran
        0.027 ms on the GPU)."""
        eager, compiled = ((self.gpu_speedup_eager, self.gpu_speedup_compile) if self.gpu_speedup_eager is not None
                           else (self.speedup_eager, self.speedup_compile))
        return eager if compiled is None else min(eager, compiled)


@dataclass(frozen=True)
class RunKernels:
    run_dir: str
    tasks_dir: str
    manifest: Manifest
    kernels: tuple  # BestKernel, one per task that has a deployable one

    def by_task(self) -> list[tuple[BestKernel, tuple]]:
        """(best kernel, its runners-up) per task that has a deployable kernel."""
        others = dict(self.runners_up)
        return [(k, others.get(k.task_id, ())) for k in self.kernels]
    passed_over: tuple  # ((task_id, why), ...) tasks of the manifest without one
    runners_up: tuple = ()  # (task_id, (BestKernel, ...)) per task with any, the fastest first


def tasks_dir_of(run_dir: Path) -> Path:
    """The tasks folder a run ran on: `tasks.path` of its config.yaml (a relative path is
    taken from the current directory, as the run took it, else from the run's parent)."""
    config = run_dir / "config.yaml"
    if not config.is_file():
        raise UserModelError(f"run directory {run_dir}: no config.yaml (not a run directory)")
    from omegaconf import OmegaConf
    path = OmegaConf.load(config).get("tasks", {}).get("path")
    if not path:
        raise UserModelError(f"run directory {run_dir} ran on the project's suite (tasks.path is not set), "
                             "not on tasks extracted from a model")
    p = Path(str(path)).expanduser()
    for candidate in ([p] if p.is_absolute() else [Path.cwd() / p, run_dir.parent / p]):
        if (candidate / MANIFEST_FILE).is_file():
            return candidate.resolve()
    raise UserModelError(f"run directory {run_dir} ran on tasks.path={path}, which holds no {MANIFEST_FILE} "
                         "(not extracted from a model, or moved: pass tasks_dir=)")


def read_run(run_dir: str | Path, model: nn.Module, *, tasks_dir: str | Path | None = None) -> RunKernels:
    """The run's deployable kernels for `model`; raises UserModelError when the run
    directory is not one, or was made for another model."""
    run_path = Path(run_dir).expanduser().resolve()
    if not run_path.is_dir():
        raise UserModelError(f"run directory {run_path} does not exist")
    folder = Path(tasks_dir).resolve() if tasks_dir is not None else tasks_dir_of(run_path)
    manifest = read_manifest(folder)
    mine = fingerprint(model)
    if mine != manifest.fingerprint:
        raise UserModelError(
            f"run directory {run_path} was made for another model: its tasks ({folder}) come from "
            f"{manifest.model_class} with parameter fingerprint {manifest.fingerprint}, but this "
            f"{type(model).__name__} has fingerprint {mine} (other parameter names, shapes or dtypes)")
    by_task: dict[str, list] = {}
    for rec in read_evaluations(run_path):
        by_task.setdefault(rec.candidate.task_id, []).append(rec)
    run = RunDir(run_path)
    kernels, passed, runners_up = [], [], []
    for region in manifest.regions:
        best = best_record(by_task.get(region.task_id, ()))
        path = run.best_file(region.task_id)
        if best is None:
            passed.append((region.task_id, "no correct kernel in the run"))
        elif best.result.speedup_eager is None:
            passed.append((region.task_id, "best correct kernel has no eager time to beat (its baseline failed)"))
        elif not faster_than_a_baseline(best.result):
            versus = "" if best.result.speedup_compile is None else \
                f" nor than torch.compile ({best.result.speedup_compile:.3g}x)"
            passed.append((region.task_id, f"best correct kernel is not faster than eager "
                                           f"({best.result.speedup_eager:.3g}x){versus}{_by_gpu_time(best.result)}"))
        elif not path.is_file():
            passed.append((region.task_id, f"{path} is missing (rebuild it: python -m foundry.report {run_path})"))
        else:
            baselines = task_baselines(by_task[region.task_id])
            kernels.append(deployable_kernel(best, str(path), path.read_text(), baselines))
            others = _runners_up(by_task[region.task_id], best, run_path, baselines)
            if others:
                runners_up.append((region.task_id, others))
    return RunKernels(run_dir=str(run_path), tasks_dir=str(folder), manifest=manifest,
                      kernels=tuple(kernels), passed_over=tuple(passed), runners_up=tuple(runners_up))


def _strategy(record: EvaluationRecord) -> str:
    return record.candidate.strategy_id or record.candidate.origin


def deployable_kernel(record: EvaluationRecord, path: str, source: str, baselines: dict) -> BestKernel:
    """`record`'s kernel, its speedups as `speedups` gives them against its task's `baselines`."""
    eager, compiled = speedups(record, baselines)
    gpu_eager, gpu_compile = gpu_speedups(record.result)
    return BestKernel(task_id=record.candidate.task_id, path=path, candidate_id=record.candidate.candidate_id,
                      speedup_eager=float(eager), speedup_compile=compiled, device=record.result.device or "cpu",
                      source=source, strategy=_strategy(record), gpu_speedup_eager=gpu_eager,
                      gpu_speedup_compile=gpu_compile)


def gpu_speedups(result: EvalResult) -> tuple[float | None, float | None]:
    """A GPU result's speedups over eager and torch.compile by CUDA-event time alone
    (metrics["gpu_speedup"]), each None where the run has none."""
    gpu = (result.metrics or {}).get("gpu_speedup") or {}
    return positive_figure(gpu.get("eager")), positive_figure(gpu.get("compile"))


def faster_than_a_baseline(result: EvalResult) -> bool:
    """Whether a correct result beat its task's eager or torch.compile form, by the judged
    times or, on a GPU, by CUDA-event time alone (a small region's judged time is mostly
    the host's launch cost, which a CUDA graph takes away)."""
    figures = (result.speedup_eager, result.speedup_compile, *gpu_speedups(result))
    return any(x is not None and x > 1.0 for x in figures)


def _by_gpu_time(result: EvalResult) -> str:
    eager, compiled = gpu_speedups(result)
    if eager is None:
        return ""
    return f", by GPU time {eager:.3g}x" + ("" if compiled is None else f" and {compiled:.3g}x")


def _runners_up(records: list, best: EvaluationRecord, run_path: Path, baselines: dict) -> tuple:
    """The fastest deployable kernel (faster than eager or than torch.compile) of each
    strategy other than `best`'s, at most RUNNERS_UP, the fastest first (`baselines`: the
    task's, `task_baselines` of `records`)."""
    by_strategy: dict[str, tuple] = {}  # strategy -> (its fastest record, that one's speedup over eager)
    for r in records:
        if not r.result.correct or _strategy(r) == _strategy(best):
            continue
        eager, compiled = speedups(r, baselines)
        if eager is None or not (eager > 1.0 or (compiled or 0.0) > 1.0 or faster_than_a_baseline(r.result)):
            continue
        held = by_strategy.get(_strategy(r))
        if held is None or eager > held[1]:
            by_strategy[_strategy(r)] = (r, eager)
    ranked = sorted(by_strategy.values(), key=lambda held: -held[1])[:RUNNERS_UP]
    return tuple(deployable_kernel(r, f"{run_path}/evaluations, candidate {r.candidate.candidate_id}",
                         runnable_source(r.candidate), baselines) for r, _ in ranked)
