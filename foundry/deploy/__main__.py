"""`python -m foundry.deploy SPEC RUN_DIR [--check]`: swap the run's best kernels into the
model SPEC returns (a function's `(model, example_inputs)` or a KernelBench task file, as
for foundry.extract) and hand back the fastest of the original, torch.compile of it, the
deployed model and torch.compile of that, measured end to end here; say which, and which
regions went in. With --check, run the original and the returned model on fresh inputs and
print the largest error and the end-to-end speedup against eager and against
torch.compile of the original (measured, same process; with --max-autotune its
max-autotune mode too).

A region stays in only where the model with it is faster than without it, timed here
(--no-speed-check: every correct kernel, eager, untimed; --no-compile: no compiled forms;
--elimination-s: how long the one-region-at-a-time tries may take, each compiling the
model; the regions not tried by then stay in). Exit 0 on success, 2 for a bad SPEC, a run directory made for another model or a kernel
whose shapes no longer match (the message names it)."""

from __future__ import annotations

import argparse
import sys
from collections import Counter

from foundry.deploy.api import ELIMINATION_S, deploy, example_inputs_of
from foundry.deploy.check import check
from foundry.deploy.runinfo import read_run
from foundry.extract.errors import UserModelError
from foundry.extract.spec import load_spec, size_overrides


def _progress(line: str) -> None:
    """deploy's steps, as they end, on stderr (stdout holds the result)."""
    print(f"[deploy] {line}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m foundry.deploy", description=__doc__.split("\n\n")[0])
    ap.add_argument("spec", help="module.path:function returning (model, example_inputs), or a KernelBench "
                                 "task file path/to/task.py")
    ap.add_argument("run_dir", help="a run directory of `python -m foundry` on the model's extracted tasks")
    ap.add_argument("--tasks", default=None, help="the extracted tasks folder (default: tasks.path of the run)")
    ap.add_argument("--check", action="store_true", help="compare with the original and time both")
    ap.add_argument("--no-compile", action="store_true",
                    help="leave torch.compile out: of the models to choose from, and of --check's baselines")
    ap.add_argument("--max-autotune", action="store_true",
                    help="with --check, time torch.compile(mode='max-autotune') of the original too (minutes to compile)")
    ap.add_argument("--no-speed-check", action="store_true",
                    help="swap in every correct kernel the run judged faster, without timing the model here")
    ap.add_argument("--elimination-s", type=float, default=ELIMINATION_S,
                    help=f"time for trying the regions one at a time, the weakest kernel first (default "
                         f"{ELIMINATION_S:.0f}); those not tried by then stay in")
    ap.add_argument("--device", default=None, help="run the model there (as for foundry.extract)")
    ap.add_argument("--sizes", choices=("full", "small"), default="full", help="a task file's sizes")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="a task file's module constant (as for foundry.extract)")
    args = ap.parse_args(argv)
    try:
        model, _ = load_spec(args.spec, device=args.device, sizes=args.sizes,
                             overrides=size_overrides(args.set))
        deployed = deploy(model, args.run_dir, tasks_dir=args.tasks, check_speed=not args.no_speed_check,
                          with_compile=not args.no_compile, elimination_s=args.elimination_s,
                          progress=_progress)
        info = deployed.foundry_deploy
        into = {"modules": " (into the model's own submodules)", "graph": " (into the captured graph)"}.get(info.form, "")
        print(f"{type(model).__name__}: {len(info.swapped)} region occurrence(s) swapped in from {info.run_dir}{into}")
        for task_id, modules, op, strategy in info.swapped:
            print(f"  {task_id:<28} {', '.join(modules) or '(model)'}  ->  {op} ({strategy})")
        for task_id, modules, best, instead, why in info.replaced:
            print(f"  {task_id}: the {instead} kernel in place of the run's best ({best}) at "
                  f"{', '.join(modules) or '(model)'}: {why}")
        for task_id, why in info.passed_over:
            print(f"  kept original: {task_id}: {why}")
        if info.untried:
            counts = Counter(info.untried)
            print("  kept without a try of their own (--elimination-s spent): "
                  + ", ".join(t if n == 1 else f"{t} ({n} occurrences)" for t, n in counts.items()))
        for name, ms in info.timings:
            print(f"  timed here, end to end: {name:<44} {ms:.4g} ms")
        for name, ms in info.confirmation:
            print(f"  timed again, the two alone: {name:<40} {ms:.4g} ms")
        print(f"returned: {info.returned}" + (f" ({info.model_speed.speedup:.3f}x the eager original)"
                                              if info.model_speed is not None else ""))
        if info.original_kept:
            print(f"  no kernel of the run is in it: {info.original_kept}")
        if args.check:
            manifest = read_run(args.run_dir, model, tasks_dir=args.tasks).manifest
            inputs = example_inputs_of(manifest)
            r = check(model, deployed, inputs, with_compile=not args.no_compile, max_autotune=args.max_autotune)
            print(f"check on fresh inputs ({', '.join(str(tuple(x.shape)) for x in inputs)}, "
                  f"{r.threads} thread(s)): largest abs error {r.max_abs_err:.3g}")
            comp = "" if r.compile_ms is None else (f", torch.compile {r.compile_ms:.4g} ms -> "
                                                     f"{r.speedup_compile:.3f}x vs torch.compile")
            if r.max_autotune_ms is not None:
                comp += f", max-autotune {r.max_autotune_ms:.4g} ms -> {r.max_autotune_ms / r.deployed_ms:.3f}x"
            print(f"  eager {r.eager_ms:.4g} ms, deployed {r.deployed_ms:.4g} ms -> {r.speedup_eager:.3f}x vs eager"
                  f"{comp}")
            if r.kernel_calls is None:
                print("  during timing: calls not counted (CUDA graph replays run no Python)")
            else:
                print(f"  during timing: {r.kernel_calls} kernel call(s), {r.fallback_calls} fallback call(s)")
    except UserModelError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
