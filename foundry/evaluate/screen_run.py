"""A screen job in the sandbox worker (`Job.kind == "screen"`): every TUNABLE point of a
candidate built and checked, then all of them timed in one hold of the device. The
judge's side is screening.py."""

from __future__ import annotations

import os
import traceback
from contextlib import contextmanager

import torch

from foundry.evaluate import output_tree, triton_prebuild

# a setting whose one trial ran this many times longer than the fastest prebuilt setting's
# (and longer than SLOW_FLOOR_S) is not timed: its runs would take the device for seconds
# to confirm what the trial showed (a convolution screen timed 1.3 s and 3.4 s settings
# for 65 s beside a 60 ms one)
SLOW_FACTOR, SLOW_FLOOR_S = 3.0, 0.25


@contextmanager
def _part(worker, parts: dict, name: str):
    start = worker.clock()
    try:
        yield
    finally:
        parts[name] = round((worker.clock() - start) / 1e9, 4)


def run_screen(worker) -> None:
    """`worker`: the job's harness.Worker. Every point first: load the candidate with its
    params, run trial 0's inputs once and send the output (the judge compares it); a
    point that fails is reported and the next one runs, and a point whose prebuild ran
    past the job's build budget is reported and skipped. Then, with the device to itself
    once, time each point that ran on the first timing set, one after another, the
    points sharing one set and one count of its changes, except a prebuilt point whose
    trial was far slower than the fastest prebuilt point's (`too_slow`). One process
    builds them all."""
    job = worker.job
    worker.trials[0]["inputs"] = None  # each point gets inputs regenerated from the seed
    report = prebuild_points(worker)
    prebuilt = {} if report is None else {"prebuild_s": round(report.wall_s, 4),
                                          "prebuilt_points": sum(report.built)}
    built: list = []  # (point index, model) of the points that ran
    trial_s: dict[int, float] = {}  # prebuilt points: their trial's seconds (rerun_seconds)
    for k, point in enumerate(job.points):
        if report is not None and report.timed_out[k]:
            worker.send({"kind": "screen_error", "point": k,
                         "error": f"its kernels were not built within the screen's build budget of "
                                  f"{job.prebuild_timeout_s:g} s (evaluator.screen_build_s): not screened"})
            continue
        parts: dict = {}  # where the point's build and trial went, on the worker's clock (advisory)
        inputs = None
        try:
            with _part(worker, parts, "load_s"):
                module = worker.load_candidate(params=point)
            with _part(worker, parts, "construct_s"):
                model = worker.construct(module.ModelNew)[0]
            with _part(worker, parts, "inputs_s"):
                inputs = worker.fresh_inputs(0)
            with _part(worker, parts, "run_s"):  # the first launch's compile included
                out, info = worker.run_trial(model, inputs, record=job.candidate.record_ops)
        except BaseException:  # noqa: BLE001 - a failing point is data, not the end of the job
            inputs = None  # a point's inputs go before the next point's (GBs at full size)
            worker.send({"kind": "screen_error", "point": k, "error": traceback.format_exc()[-3000:]})
            continue
        parts.update(prebuilt)  # the whole prebuild, counted once: with the first point that ran
        prebuilt = {}
        tensors: list = []
        worker.send({"kind": "screen_trial", "point": k, "tree": output_tree.encode_tree(out, tensors),
                     "parts": parts, **info}, tensors)
        del out, tensors
        built.append((k, model))
        if report is not None and report.built[k]:
            trial_s[k] = rerun_seconds(worker, model, inputs, parts["run_s"])
        inputs = None
    slow = too_slow(trial_s)
    for k in sorted(slow):
        worker.send({"kind": "screen_error", "point": k, "error": slow[k]})
    built = [(k, model) for k, model in built if k not in slow]
    if not built:
        return
    sets = [worker.fresh_inputs(i) for i in job.timing.sets]  # one timing set for every point
    changes = [0]
    if not worker.wait_go():  # the go comes with the device to itself
        return
    for k, model in built:
        worker.time_model(model, job.timing, kind="screen_timing", extra={"point": k}, fatal=False, sets=sets,
                          changes=changes)
    worker.wait_go()  # timed: the device is let go


def rerun_seconds(worker, model, inputs, first_s: float) -> float:
    """A prebuilt point's trial seconds as `too_slow` reads them: `first_s` where it is
    under SLOW_FLOOR_S, else a second run's (the first launch also loads the kernels and
    builds Triton's launcher, over half a second on a GPU even for a 3 us kernel); the
    first's where the second fails."""
    if first_s <= SLOW_FLOOR_S:
        return first_s
    start = worker.clock()
    try:
        worker.run_trial(model, inputs, record=False)
    except BaseException:  # noqa: BLE001 - it ran once: the first run's seconds stand
        return first_s
    return (worker.clock() - start) / 1e9


def too_slow(trial_s: dict[int, float]) -> dict[int, str]:
    """Of the points whose trial took `trial_s[k]` seconds (their kernels built before, so
    no compile in it; `rerun_seconds`), those not worth timing, each with why: slower than
    SLOW_FACTOR times the fastest and than SLOW_FLOOR_S."""
    if not trial_s:
        return {}
    fastest = min(trial_s.values())
    return {k: f"its trial took {s:.3g} s, {s / max(fastest, 1e-9):.1f}x the fastest setting's ({fastest:.3g} s): "
               f"not timed" for k, s in trial_s.items() if s > max(SLOW_FACTOR * fastest, SLOW_FLOOR_S)}


def prebuild_points(worker) -> "triton_prebuild.PrebuildReport | None":
    """Every point's Triton kernels built into Triton's disk cache at once, before the
    loop (triton_prebuild; a child is killed after `job.prebuild_timeout_s`), where the job
    is a Triton candidate on a CUDA device with more than one point and
    `job.prebuild_workers` children may build at once: the prebuild's report; None
    elsewhere."""
    job = worker.job
    if (job.device != "cuda" or job.candidate.backend != "triton" or len(job.points) < 2
            or job.prebuild_workers < 1):
        return None
    if triton_prebuild.unsupported() is not None:
        return None
    target = triton_prebuild.device_target()
    if target is None:
        return None
    worker.ensure_worker_setup()
    worker.write_candidate_file()  # before the fork: the children read it, none writes it
    variant = worker.variants[worker.trials[0]["variant"]]
    try:  # the task's own code, before any candidate code here: shapes and dtypes only
        with torch.device("meta"):
            inputs = list(variant["module"].get_inputs())
    except Exception:  # noqa: BLE001 - inputs that need real values: the loop builds every point
        return None

    def build(point: dict) -> None:
        module = worker.load_candidate(params=point)
        with torch.device("meta"):
            model = module.ModelNew(*variant["init"])
        with torch.no_grad():
            model(*inputs)

    def in_child() -> None:  # nothing a child does reaches the judge
        worker.send = lambda *args, **kwargs: None

    workers = min(job.prebuild_workers, len(job.points), os.cpu_count() or 1)
    return triton_prebuild.prebuild(job.points, build, target=target, workers=workers,
                                    timeout_s=job.prebuild_timeout_s, in_child=in_child)
