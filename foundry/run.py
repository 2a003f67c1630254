"""The driver: `python -m foundry` composes the config and calls `run(cfg)`.

It validates every config group through its owner's config class, starts Ray (a local
instance by default, `ray.address=auto` or an address for a cluster), loads the tasks,
starts the actors, records every evaluation in the run directory as it arrives, enforces
the budgets (evaluations, LLM cost, wall time, target speedup), and at the end, or on
Ctrl-C, stops the islands, waits for work in flight (`run.stop_timeout_s` at most; a
second Ctrl-C stops at once), records what had not finished as unfinished, and writes
the report.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from actors.config import BudgetConfig, RayConfig, RunOptions
from foundry.config_keys import ConfigError, check_known
from foundry.progress import ProgressView, RunProgress
from foundry.store import EvaluationLog, RunDir, read_evaluations
from foundry.store.report import build_report
from foundry.store.unfinished import read_unfinished

log = logging.getLogger("foundry.run")
GROUPS = ("tasks", "llm", "evaluator", "island", "prompt", "templates")
TOP_KEYS = ("tasks", "llm", "evaluator", "island", "prompt", "templates", "ray", "budget", "run",
            "seed", "resume")


@dataclass(frozen=True)
class Settings:
    """The validated config of one run."""

    raw: dict  # the resolved config, plain containers
    ray: RayConfig
    budget: BudgetConfig
    run: RunOptions
    seed: int
    resume: str | None


def settings_from(cfg: Any) -> Settings:
    """Validate a composed config; raises ConfigError naming the bad key or value."""
    raw = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else dict(cfg)
    raw.pop("hydra", None)
    check_known(raw, TOP_KEYS, group="")
    seed = raw.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"seed: expected an integer, got {seed!r}")
    resume = raw.get("resume")
    if resume is not None and not isinstance(resume, str):
        raise ConfigError(f"resume: expected a run directory path, got {resume!r}")
    settings = Settings(raw=raw, ray=RayConfig.from_config(raw.get("ray")),
                        budget=BudgetConfig.from_config(raw.get("budget")),
                        run=RunOptions.from_config(raw.get("run")), seed=seed, resume=resume)
    from actors.parts import validate_groups
    skip = (("evaluator",) if settings.run.evaluator_impl else ()) + (
        ("templates",) if settings.run.proposer_impl else ())
    try:
        validate_groups({g: raw.get(g) or {} for g in GROUPS}, skip=skip)
    except ConfigError:
        raise
    except (ValueError, TypeError, KeyError) as e:
        raise ConfigError(str(e)) from None
    return settings


def _resume_config(cfg: DictConfig, run_dir: Path) -> DictConfig:
    """The stopped run's config, with what this command line overrode on top."""
    saved = OmegaConf.load(run_dir / "config.yaml")
    try:
        from hydra.core.hydra_config import HydraConfig
        overrides = list(HydraConfig.get().overrides.task)
    except Exception:  # noqa: BLE001 - not started by Hydra: nothing overridden
        overrides = []
    for text in overrides:
        key = text.split("=", 1)[0].lstrip("+~")
        if key in ("resume", "exp") or OmegaConf.select(cfg, key, default=None) is None:
            continue
        OmegaConf.update(saved, key, OmegaConf.select(cfg, key), merge=False)
    saved.resume = str(run_dir)
    return saved


def _hydra_output_dir() -> Path | None:
    try:
        from hydra.core.hydra_config import HydraConfig
        return Path(HydraConfig.get().runtime.output_dir)
    except Exception:  # noqa: BLE001 - called without Hydra
        return None


def _start_ray(rc: RayConfig) -> bool:
    """Start or join Ray; False when the caller's process already had Ray running."""
    import ray
    if ray.is_initialized():
        return False
    kw: dict[str, Any] = {"include_dashboard": rc.include_dashboard, "log_to_driver": rc.log_to_driver,
                          "namespace": rc.namespace, "configure_logging": False}
    if rc.runtime_env:
        kw["runtime_env"] = rc.runtime_env
    if rc.address:
        kw["address"] = rc.address
    else:
        kw.update(address="local", num_cpus=rc.num_cpus or os.cpu_count(), num_gpus=rc.num_gpus)
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    ray.init(**kw)
    return True


def _load_tasks(tasks_cfg: dict, *, gpu: bool) -> list:
    from foundry.tasks.suite import SuiteConfig
    try:
        tasks = SuiteConfig.from_config(tasks_cfg).load(device="cuda" if gpu else "cpu")
    except ConfigError:
        raise  # names its key already (tasks.<key>)
    except ValueError as e:
        raise ConfigError(f"tasks: {e}") from None
    return list(tasks)


def run(cfg: Any) -> Path:
    """Run (or resume) one search; returns the run directory. The wall-time budget
    counts from here: starting Ray and the actors is part of it."""
    started = time.monotonic()
    from actors.supervisor import Supervisor
    if isinstance(cfg, DictConfig) and cfg.get("resume"):
        resume_dir = Path(str(cfg.resume)).resolve()
        if not (resume_dir / "config.yaml").exists():
            raise ConfigError(f"resume: {resume_dir} is not a run directory (no config.yaml)")
        cfg = _resume_config(cfg, resume_dir)
    settings = settings_from(cfg)
    run_dir = RunDir(settings.resume or _hydra_output_dir() or
                     Path("runs") / time.strftime("%Y-%m-%d_%H-%M-%S"))
    if not settings.resume and run_dir.meta_path.exists():
        # a second session there would mix its evaluations with the first's in every figure
        raise ConfigError(f"{run_dir.path} already holds a run: continue it with resume={run_dir.path}, "
                          f"or give hydra.run.dir a folder without one")
    OmegaConf.save(OmegaConf.create(settings.raw), run_dir.config)
    progress_mode = settings.run.progress
    say = ProgressView(RunProgress(tasks={}), mode=progress_mode).say

    started_ray = _start_ray(settings.ray)  # multirun: each job starts and stops its own
    import ray
    try:
        gpus = int(ray.cluster_resources().get("GPU", 0))
        if settings.ray.max_gpu_evaluators:
            gpus = min(gpus, settings.ray.max_gpu_evaluators)
        backend = settings.run.backend
        if backend == "auto":
            backend = "triton" if gpus else "c"
        tasks = _load_tasks(dict(settings.raw.get("tasks") or {}), gpu=bool(gpus))
        profile = tasks[0].size_profile
        if gpus:
            say(f"KernelFoundry: {gpus} GPU evaluator(s), backend {backend}, task sizes {profile}, "
                f"{len(tasks)} task(s)")
        else:
            say(f"KernelFoundry: no GPU found, running the CPU path: backend {backend}, task sizes "
                f"{profile}, {settings.ray.cpu_evaluators} CPU evaluator(s), {len(tasks)} task(s)")
        prior = read_evaluations(run_dir.path) if settings.resume else []
        unfinished = read_unfinished(run_dir.path) if settings.resume else []
        if settings.resume:
            say(f"resuming {run_dir.path}: {len(prior)} evaluations already recorded"
                + (f", {len(unfinished)} unfinished" if unfinished else ""))
        meta = run_dir.read_meta()
        meta.update(tasks=[t.task_id for t in tasks], backend=backend, profile=profile, gpus=gpus)
        meta.setdefault("sessions", []).append({"started": time.time(), "resumed_from": len(prior)})
        meta.pop("stop_reason", None)
        run_dir.write_meta(meta)
        evlog = EvaluationLog(run_dir.path)
        progress = RunProgress.for_tasks([t.task_id for t in tasks],
                                         budget_evaluations=settings.budget.evaluations,
                                         wall_time_s=settings.budget.wall_time_s)
        view = ProgressView(progress, mode=progress_mode, every_s=settings.run.progress_every_s)
        sup = Supervisor(settings=settings, run_dir=run_dir, tasks=tasks, backend=backend, gpus=gpus,
                         prior=prior, evlog=evlog, progress=progress, view=view, unfinished=unfinished,
                         started=started)
        try:
            reason = sup.start_and_watch()
        except KeyboardInterrupt:
            reason = "interrupted (Ctrl-C)"
            view.say(f"KernelFoundry: stopping on Ctrl-C; waiting for work in flight up to "
                     f"{settings.run.stop_timeout_s:g} s (Ctrl-C again to stop at once)")
        stop_started = time.monotonic()
        try:
            sup.stop(reason)
        except KeyboardInterrupt:
            reason += "; stopped at once"
            sup.stop(reason, wait=False)
        stop_s = time.monotonic() - stop_started
        evlog.close()
        meta = run_dir.read_meta()
        meta["stop_reason"] = reason
        from actors.island_worker import peak_rss_mb
        session = meta["sessions"][-1]
        session["peak_rss_mb"] = {"driver": peak_rss_mb(), **sup.peak_rss_mb}
        session.update(progress.session_summary())
        session["unfinished"] = [u.summary() for u in sup.unfinished]
        session["stop_s"] = round(stop_s, 3)
        session["dispatch"] = sup.dispatch_stats  # per evaluator: done, lost, busy, starved_s (lanes idle)
        session["cluster"] = sup.cluster_summary()  # nodes, where actors ran, nodes lost/added, migrations
        session["compiler_seeds"] = dict(sup.seeds.notes)  # per task: the seed made, or why none
        session["ended"] = time.time()
        run_dir.write_meta(meta)
        view.close()
        report = build_report(run_dir.path)
        say(f"KernelFoundry: stopped: {reason}. Report: {report}")
        return run_dir.path
    finally:
        if started_ray:
            ray.shutdown()


def main_entry(cfg: Any) -> int:
    """`python -m foundry`'s body: config errors end with a one-line message and exit 2."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        run(cfg)
    except ConfigError as e:
        print(f"error: bad config: {e}", file=sys.stderr)
        return 2
    return 0
