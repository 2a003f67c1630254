"""KernelBench level-3 models as users' models: per model, extract, search, deploy and
check, each step in its own process, resumable (a step whose output is there is skipped; a
search cut short is started again).

    python benchmarks/kernelbench_models.py ../shared/kernelbench/level3/4_LeNet5.py \\
        --out runs/kb_models --search-s 240 [--set batch_size=8] [--device cpu] [--max-autotune]

Per model, under OUT/<file stem>/: `tasks/` (foundry.extract), `run/` (the main job,
`llm=none` unless --llm says otherwise, --search-s seconds), `deploy.json` (what deploy
handed back and the end-to-end times it measured: eager, torch.compile and the returned
model, interleaved in one process, and the largest error on fresh inputs; with
--max-autotune, written first and then again with torch.compile's max-autotune mode timed
beside the returned model in a second round, so a compile that outlives the call loses
nothing measured before it), `steps.json` (each step's seconds). The
last line printed per model is a summary: the regions and their shares, how many got a
correct kernel in the run, the times and the error. With --extract-jobs N every model is
extracted first, N at a time (extraction's only timings are the regions' shares of the
forward, taken interleaved in one process, which order the search; on a GPU the
processes share it and skew those shares, so keep N at 1 there), then searched and
deployed one at a time (those steps time kernels and have the machine to themselves). With
--gpus N (and --device cuda) N models go through their steps at a time, each with a GPU to
itself (CUDA_VISIBLE_DEVICES): they share the host's cores, so give each GPU enough of them."""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _step(cmd: list[str], log: Path, timeout_s: float, gpu: int | None = None) -> float:
    """Run `cmd` from the project root, its output into `log`, on GPU `gpu` alone where one
    is given (CUDA_VISIBLE_DEVICES); returns its seconds."""
    t0 = time.monotonic()
    env = None if gpu is None else {**os.environ, "CUDA_VISIBLE_DEVICES": str(gpu)}
    with log.open("w") as f:
        try:
            p = subprocess.run(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, timeout=timeout_s, env=env)
        except subprocess.TimeoutExpired:
            raise SystemExit(f"{' '.join(cmd[:4])} ... ran past {timeout_s:.0f} s: see {log}") from None
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {p.returncode}: see {log}")
    return time.monotonic() - t0


def deploy_one(spec: str, run_dir: str, overrides: list[str], device: str | None, out: str,
               max_autotune: bool = False, elimination_s: float | None = None) -> None:
    """In this process: deploy the model of `spec` from `run_dir`, check it against the
    original and write what was seen to `out` (JSON)."""
    import torch

    from foundry.deploy import deploy
    from foundry.deploy.api import example_inputs_of
    from foundry.deploy.check import check
    from foundry.deploy.runinfo import read_run
    from foundry.extract.spec import load_spec, size_overrides

    model, _ = load_spec(spec, device=device, overrides=size_overrides(overrides))
    t0 = time.monotonic()
    bound = {} if elimination_s is None else {"elimination_s": elimination_s}  # None: deploy's default
    deployed = deploy(model, run_dir, **bound, progress=lambda line: print(f"[deploy] {line}", flush=True))
    deploy_s = time.monotonic() - t0
    info = deployed.foundry_deploy
    inputs = example_inputs_of(read_run(run_dir, model).manifest)
    r = check(model, deployed, inputs)
    record = {
        "spec": spec, "overrides": overrides, "torch": torch.__version__, "threads": r.threads,
        "returned": info.returned, "swapped": [[t, list(m), strategy] for t, m, _, strategy in info.swapped],
        "passed_over": [[t, why] for t, why in info.passed_over], "untried": dict(Counter(info.untried)),
        "replaced": [[t, list(m), best, instead, why] for t, m, best, instead, why in info.replaced],
        "deploy_timings_ms": dict(info.timings), "deploy_confirmation_ms": dict(info.confirmation),
        "deploy_s": deploy_s, "max_abs_err": r.max_abs_err, "eager_ms": r.eager_ms, "compile_ms": r.compile_ms,
        "returned_ms": r.deployed_ms, "kernel_calls": r.kernel_calls, "fallback_calls": r.fallback_calls,
        "max_autotune_ms": None,
    }
    if max_autotune:  # its compile can take many minutes: what was measured is written first
        record["max_autotune"] = "compiling: a record still saying so was cut there"
    Path(out).write_text(json.dumps(record, indent=1))
    if max_autotune:
        t0 = time.monotonic()
        again = check(model, deployed, inputs, with_compile=False, max_autotune=True)
        record.update(max_autotune=f"timed beside the returned model ({time.monotonic() - t0:.0f} s with its compile)",
                      max_autotune_ms=again.max_autotune_ms, returned_ms_beside_max_autotune=again.deployed_ms)
        Path(out).write_text(json.dumps(record, indent=1))


def covered_tasks(run_dir: Path) -> int:
    """How many of the run's tasks have a correct kernel."""
    from foundry.store.evallog import read_evaluations
    return len({rec.result.task_id for rec in read_evaluations(run_dir) if rec.result.correct})


def summary(name: str, record: dict, manifest_file: Path, covered: int | None = None) -> str:
    manifest = json.loads(manifest_file.read_text())
    regions = ", ".join(f"{r['label']} x{r['count']} ({r['share']:.0%})" for r in manifest["regions"])
    best = min(record["eager_ms"], record["compile_ms"] or float("inf"))
    autotune = record.get("max_autotune_ms")
    beside = record.get("returned_ms_beside_max_autotune")
    autotune = (f", max-autotune {autotune:.4g} ms" + (f" ({autotune / beside:.3f}x: returned {beside:.4g} ms beside it)"
                                                      if beside else "")) if autotune else ""
    kernels = "" if covered is None else f"; {covered} of {len(manifest['regions'])} region(s) with a correct kernel"
    return (f"{name}: regions {regions or 'none'}{kernels}; returned {record['returned']} with "
            f"{len(record['swapped'])} region(s) swapped in; eager {record['eager_ms']:.4g} ms, torch.compile "
            f"{record['compile_ms']:.4g} ms{autotune}, returned {record['returned_ms']:.4g} ms "
            f"({best / record['returned_ms']:.3f}x the faster of eager and torch.compile); "
            f"max abs error {record['max_abs_err']:.3g}; {record['threads']} thread(s)")


def steps_plan(file: str, d: Path, a: argparse.Namespace, sets: list[str], dev: list[str]) -> list:
    """One model's steps into `d`: (name, the output that marks it done, command, timeout s)."""
    spec = str(Path(file).resolve())
    return [("extract", d / "tasks" / "manifest.json",
             [sys.executable, "-m", "foundry.extract", spec, "--out", str(d / "tasks"), *sets, *dev], 3600),
            ("search", d / "run" / "report.md",
             [sys.executable, "-m", "foundry", f"tasks.path={d / 'tasks'}", f"llm={a.llm}",
              f"budget.wall_time_s={a.search_s}", f"hydra.run.dir={d / 'run'}"], a.search_s + 600),
            ("deploy", d / "deploy.json",
             [sys.executable, __file__, spec, "--deploy-one", str(d / "run"), str(d / "deploy.json"), *sets, *dev,
              *(["--max-autotune"] if a.max_autotune else []),
              *([] if a.elimination_s is None else ["--elimination-s", str(a.elimination_s)])], 3600)]


def run_steps(d: Path, plan: list, gpu: int | None = None) -> None:
    """Run the steps of `plan` whose output is not in `d` yet (on GPU `gpu` alone where one
    is given); each step's seconds go into d/steps.json. Raises SystemExit naming the step
    that failed."""
    steps_file = d / "steps.json"
    steps = json.loads(steps_file.read_text()) if steps_file.is_file() else {}
    for name, output, cmd, timeout_s in plan:
        if output.is_file():
            continue
        if name == "search" and (d / "run").exists():  # a search cut short (the call's time ran out)
            shutil.rmtree(d / "run")  # starts again with its whole time, so every model gets the same
            print(f"{d.name}: an unfinished search was there: removed, searching from the start", flush=True)
        steps[name] = round(_step(cmd, d / f"{name}.log", timeout_s, gpu=gpu), 1)
        steps_file.write_text(json.dumps(steps, indent=1))
        print(f"{d.name}: {name} took {steps[name]:.0f} s" + ("" if gpu is None else f" on GPU {gpu}"), flush=True)


def model_steps(file: str, d: Path, a: argparse.Namespace, sets: list[str], dev: list[str],
                gpu: int | None = None) -> None:
    """Extract, search, deploy and check one model into `d` (on GPU `gpu` alone where one
    is given), skipping each step whose output is there."""
    run_steps(d, steps_plan(file, d, a, sets, dev), gpu)


def each_model(files: list[str], one, gpus: int) -> None:
    """`one(file, gpu)` for each of `files`: in order with gpu None where `gpus` is 0, else
    `gpus` models at a time, each on a GPU of its own (0 to gpus - 1), the next model taking
    the GPU that a finished one gave back."""
    if gpus <= 0:
        for file in files:
            one(file, None)
        return
    free: queue.Queue = queue.Queue()
    for gpu in range(gpus):
        free.put(gpu)

    def on_a_free_gpu(file: str) -> None:
        gpu = free.get()
        try:
            one(file, gpu)
        finally:
            free.put(gpu)

    with ThreadPoolExecutor(max_workers=gpus) as pool:
        list(pool.map(on_a_free_gpu, files))


def extract_all(files: list[str], dirs: dict, a: argparse.Namespace, sets: list[str], dev: list[str]) -> dict:
    """Extract every model not extracted yet, `a.extract_jobs` at a time; {model name: why}
    for those that failed."""
    def one(file: str) -> tuple[str, str | None]:
        d = dirs[file]
        try:
            run_steps(d, steps_plan(file, d, a, sets, dev)[:1])
        except SystemExit as e:
            return d.name, str(e)
        return d.name, None

    with ThreadPoolExecutor(max_workers=a.extract_jobs) as pool:
        return {name: why for name, why in pool.map(one, files) if why is not None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", help="KernelBench task files")
    ap.add_argument("--out", default="runs/kb_models")
    ap.add_argument("--search-s", type=int, default=240, help="the main job's wall-time budget per model")
    ap.add_argument("--llm", default="none")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="passed to extract/deploy")
    ap.add_argument("--device", default=None)
    ap.add_argument("--max-autotune", action="store_true", help="time torch.compile's max-autotune mode too")
    ap.add_argument("--elimination-s", type=float, default=None,
                    help="deploy's time for trying regions one at a time (default: deploy's own)")
    ap.add_argument("--extract-jobs", type=int, default=1, metavar="N",
                    help="extract every model first, N at a time (then search and deploy one at a time)")
    ap.add_argument("--gpus", type=int, default=0, metavar="N",
                    help="search and deploy N models at a time, each on a GPU of its own (the first N GPUs)")
    ap.add_argument("--deploy-one", nargs=2, metavar=("RUN_DIR", "OUT_JSON"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.gpus < 0 or (a.gpus and not (a.device or "").startswith("cuda")):
        ap.error(f"--gpus {a.gpus}: give a count of GPUs, with --device cuda")
    if a.deploy_one:
        deploy_one(a.files[0], a.deploy_one[0], a.set, a.device, a.deploy_one[1], max_autotune=a.max_autotune,
                   elimination_s=a.elimination_s)
        return 0
    sets = [x for s in a.set for x in ("--set", s)]
    dev = ["--device", a.device] if a.device else []
    dirs = {file: (Path(a.out) / Path(file).stem).resolve() for file in a.files}
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    not_extracted = extract_all(a.files, dirs, a, sets, dev) if a.extract_jobs > 1 else {}
    failed = []

    def one(file: str, gpu: int | None) -> None:
        d = dirs[file]
        if d.name in not_extracted:
            print(f"{d.name}: {not_extracted[d.name]}", flush=True)
            failed.append(d.name)
            return
        try:
            model_steps(file, d, a, sets, dev, gpu)
        except SystemExit as e:  # one model's failure is reported; the others go on
            print(f"{d.name}: {e}", flush=True)
            failed.append(d.name)
            return
        print(summary(d.name, json.loads((d / "deploy.json").read_text()), d / "tasks" / "manifest.json",
                      covered_tasks(d / "run")), flush=True)

    each_model(a.files, one, a.gpus)
    if failed:
        print(f"{len(failed)} of {len(a.files)} model(s) failed: {', '.join(failed)}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
