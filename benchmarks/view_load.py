"""How fast the run page (`python -m foundry.view`) loads a large run, and how much one
refresh fetches.

Writes a run directory of `--tasks` tasks and `--evaluations` evaluations through the
store's own writer (`EvaluationLog`, in parts of `--rows-per-part` rows: the driver
flushes every 5 s, so a 3-hour run of 5,000 evaluations writes parts of ~3 rows), with
`run.json` and `evaluators.json` as the driver writes them. Candidates are C kernels of
the size the template engine writes (~11 KB, the median of a CPU `exp=kernelbench` run),
in lineages per island, a quarter of them failing with an error; results carry the judge's
per-phase seconds and tuning metrics. Then it starts the page's server on loopback
(reading the run once first, as the command does), opens the page in headless Chromium
(Playwright; the system's Chromium) and measures:

- load: from navigation to the page having drawn every task (its `data-ready`), wall time
  and in the page's own clock (from its navigation), with when the one update it fetched
  had arrived (same clock) and its size;
- refresh: `--refresh` more evaluations recorded as a live run records them (one new
  part), then the page's poll run back to back until it shows them: what each poll asked
  for (`since=N`), the bytes of the answer that carried them (and of one that did not, while
  the server was still reading the changed log in the background), the time from the first
  poll to the page showing them, and how long the server's re-read took;
- opening one kernel (its source, diff and verdict fetched and drawn);
- with `--report-html`: writing `report.html` for the run, its size, and opening it.

    python benchmarks/view_load.py [--tasks 40] [--evaluations 5000] [--report-html] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

from foundry.store import EvaluationLog, RunDir
from foundry.store.rundir import write_atomic
from foundry.types import Candidate, EvalResult, Stage

PHASES = ("worker_start", "static_checks", "build", "references", "trials", "compare", "degeneracy",
          "timing", "timed_output_check", "tuning", "worker_exit", "release")
KERNEL = '''
void {name}_{i}(const float* __restrict x, float* __restrict y, int64_t rows, int64_t cols) {{
    #pragma omp parallel for schedule({sched}) num_threads(THREADS)
    for (int64_t r = 0; r < rows; r++) {{
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        float acc = 0.f;
        #pragma omp simd reduction(+:acc) simdlen({simd})
        for (int64_t c = 0; c < cols; c++) {{ acc += xr[c] * xr[c]; }}
        const float scale = 1.f / sqrtf(acc / (float)cols + {eps}f);
        for (int64_t c0 = 0; c0 < cols; c0 += {block}) {{
            const int64_t c1 = c0 + {block} < cols ? c0 + {block} : cols;
            for (int64_t c = c0; c < c1; c++) {{ yr[c] = xr[c] * scale; }}
        }}
    }}
}}
'''
MODULE = '''# foundry-template: {{"backend": "c", "variant": "fused"}}
"""Template candidate (c backend) for {task}: fused regions as OpenMP/SIMD C kernels."""
import torch
import torch.nn as nn
from foundry.kernels import c

TUNABLE = {{"BLOCK": [256, 1024, 4096, 16384], "SIMD": [4, 8, 16], "SCHED": ["static", "dynamic"]}}
PARAMS = {{"BLOCK": {block}, "SIMD": {simd}, "SCHED": "{sched}"}}

SRC = r"""
#include <math.h>
#include <stdint.h>
#define THREADS 1
{kernels}
"""
_lib = c.build(SRC)


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.{name}_0(x, y, x.shape[0], x.numel() // x.shape[0])
        return y
'''


def candidate_source(task: str, n: int, rng: random.Random) -> tuple[str, dict]:
    params = {"BLOCK": rng.choice([256, 1024, 4096, 16384]), "SIMD": rng.choice([4, 8, 16]),
              "SCHED": rng.choice(["static", "dynamic"])}
    name = "k" + task.split("/")[-1].split("_")[0]
    kernels = "".join(KERNEL.format(name=name, i=i, sched=params["SCHED"], simd=params["SIMD"],
                                    eps=f"1e-{5 + (n + i) % 3}", block=params["BLOCK"]) for i in range(12))
    source = MODULE.format(task=task, block=params["BLOCK"], simd=params["SIMD"], sched=params["SCHED"],
                           kernels=kernels, name=name) + f"# variant {n}\n"
    return source, params


def result_for(cand: Candidate, rng: random.Random, eager_ms: float) -> EvalResult:
    phases = {p: round(rng.uniform(0.001, 0.3), 4) for p in PHASES}
    phases["tuning"] = round(rng.uniform(1, 5), 3)
    common = dict(candidate_id=cand.candidate_id, task_id=cand.task_id, hardware="cpu:x86_64:1-threads",
                  descriptor=(rng.randrange(4), rng.randrange(4), rng.randrange(4)), eval_s=rng.uniform(2, 8),
                  compile_s=rng.uniform(0.005, 0.05))
    metrics = {"phases": phases, "tuning": [{"params": cand.params, "runtime_ms": eager_ms * rng.uniform(0.3, 2)}
                                            for _ in range(6)], "trials_run": 3, "worker_peak_rss_mb": 300.0}
    if rng.random() < 0.25:
        return EvalResult(stage=rng.choice([int(Stage.COMPILE), int(Stage.RUNTIME), int(Stage.VALUE)]),
                          correct=False, error="error: 'acc' undeclared (first use in this function)\n" * 3,
                          metrics=metrics, **common)
    runtime = eager_ms / rng.lognormvariate(0.2, 0.4)
    return EvalResult(stage=int(Stage.CORRECT), correct=True, runtime_ms=runtime, runtime_spread=rng.uniform(0.01, 0.2),
                      eager_ms=eager_ms, compile_ms=eager_ms * 0.8, speedup_eager=eager_ms / runtime,
                      speedup_compile=eager_ms * 0.8 / runtime, metrics=metrics, **common)


def write_run(path: Path, *, tasks: int, evaluations: int, islands: int, rows_per_part: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    run = RunDir(path)
    task_ids = [f"level1/{i + 1:02d}_Task{i + 1}" for i in range(tasks)]
    run.write_meta({"tasks": task_ids, "backend": "c", "profile": "small", "gpus": 0,
                    "sessions": [{"started": time.time(), "resumed_from": 0}]})
    write_atomic(run.path / "evaluators.json", json.dumps(
        [{"name": f"evaluator-{i}", "host": f"node-{i // 2}", "gpu_ids": [i % 2], "lanes": 4, "evaluated": 0,
          "busy_s": 0.0} for i in range(4)]))
    log = EvaluationLog(run.path, flush_rows=rows_per_part, flush_s=1e9)
    append(log, rng, task_ids, evaluations, islands, {})
    log.close()
    return task_ids


def append(log: EvaluationLog, rng: random.Random, task_ids: list[str], count: int, islands: int,
           pools: dict) -> None:
    """Record `count` evaluations, round-robin over the tasks, each child of an earlier
    candidate of its task and island (none for the first ones)."""
    for n in range(count):
        task = task_ids[n % len(task_ids)]
        island = rng.randrange(islands)
        pool = pools.setdefault((task, island), [])
        source, params = candidate_source(task, n + rng.randrange(10**9), rng)
        parent = rng.choice(pool) if pool and rng.random() < 0.9 else None
        cand = Candidate.make(task_id=task, source=source, backend="c", params=params,
                              parent_ids=(parent,) if parent else (), island_id=island,
                              generation=len(pool), strategy_id=rng.choice(["template:fused", "template:linear"]),
                              origin="template")
        pool.append(cand.candidate_id)
        log.append(cand, result_for(cand, rng, eager_ms=1.0 + task_ids.index(task) / 10), evaluator=f"evaluator-{n % 4}")


def measure(args) -> dict:
    from playwright.sync_api import sync_playwright

    from foundry.view.model import RunReader
    from foundry.view.server import ViewServer

    workdir = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="view-load-"))
    run_path = workdir / "run"
    if run_path.exists():
        shutil.rmtree(run_path)
    t0 = time.perf_counter()
    task_ids = write_run(run_path, tasks=args.tasks, evaluations=args.evaluations, islands=args.islands,
                         rows_per_part=args.rows_per_part, seed=args.seed)
    out: dict = {"tasks": args.tasks, "evaluations": args.evaluations, "islands": args.islands,
                 "parts": len(list((run_path / "evaluations").glob("part-*.parquet"))),
                 "log_mb": round(sum(p.stat().st_size for p in (run_path / "evaluations").iterdir()) / 1e6, 1),
                 "write_s": round(time.perf_counter() - t0, 2)}
    reader = RunReader(run_path)
    t0 = time.perf_counter()
    reader.snapshot()
    out["server_first_read_s"] = round(time.perf_counter() - t0, 3)
    server = ViewServer(reader, host="127.0.0.1", port=0, poll_s=3600)
    server.start_in_thread()
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=args.chromium, headless=True)
            out["chromium"] = browser.version
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            sizes_all: list[tuple[str, int]] = []
            page.on("response", lambda r: "/api/" in r.url and sizes_all.append((r.url.split("/api/")[1], len(r.body()))))
            loads, in_page, fetched = [], [], []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                page.goto(server.url)
                page.wait_for_selector("body[data-ready='1']", timeout=120_000)
                loads.append(time.perf_counter() - t0)
                in_page.append(page.evaluate("window.kfView.readyAt") / 1000)
                fetched.append(page.evaluate(
                    "performance.getEntriesByType('resource').filter(e => e.name.includes('api/update'))"
                    ".map(e => e.responseEnd / 1000)[0]"))
            assert page.locator("section.task").count() == args.tasks, "not every task was drawn"
            out["load_s"] = [round(x, 3) for x in loads]
            out["load_in_page_s"] = [round(x, 3) for x in in_page]
            out["load_update_received_s"] = [round(x, 3) for x in fetched]  # in the page's clock
            out["first_update_bytes"] = next((n for k, n in sizes_all if k == "update?since=0"), None)
            log = EvaluationLog(run_path, flush_rows=10**9, flush_s=1e9)
            append(log, random.Random(args.seed + 1), task_ids, args.refresh, args.islands, {})
            log.close()  # one new part, as the driver's next flush writes it
            total = str(args.evaluations + args.refresh)
            t0 = time.perf_counter()
            polls = 0
            while page.get_attribute("body", "data-total") != total and time.perf_counter() - t0 < 120:
                page.evaluate("window.kfView.poll()")  # the page's own poll, run now rather than on its timer
                polls += 1
                if page.get_attribute("body", "data-total") != total:
                    page.wait_for_timeout(100)
            assert page.get_attribute("body", "data-total") == total, "the refresh never showed the new evaluations"
            out["refresh_s"] = round(time.perf_counter() - t0, 3)
            out["refresh_polls"] = polls
            out["server_reread_s"] = round(reader.last_build_s, 3)
            key = f"update?since={args.evaluations}"
            out["refresh_request"] = key
            out["refresh_bytes_with_rows"] = max((n for k, n in sizes_all if k == key), default=None)
            out["refresh_bytes_without_rows"] = min((n for k, n in sizes_all if k == key), default=None)
            t0 = time.perf_counter()
            page.click("section.task button.lineage-link")
            page.wait_for_selector("#kernel[data-loaded]", timeout=60_000)
            out["open_kernel_s"] = round(time.perf_counter() - t0, 3)
            if args.report_html:
                from foundry.view.report_html import write_report_html
                t0 = time.perf_counter()
                html_path = write_report_html(run_path, workdir / "report.html")
                out["report_html_write_s"] = round(time.perf_counter() - t0, 2)
                out["report_html_mb"] = round(html_path.stat().st_size / 1e6, 1)
                opens = []
                for _ in range(2):
                    t0 = time.perf_counter()
                    page.goto(html_path.as_uri(), timeout=120_000)
                    page.wait_for_selector("body[data-ready='1']", timeout=120_000)
                    opens.append(round(time.perf_counter() - t0, 3))
                out["report_html_load_s"] = opens
            out["page_errors"] = errors
            browser.close()
    finally:
        server.shutdown()
        server.server_close()
        if not args.out:
            shutil.rmtree(workdir, ignore_errors=True)
    out["versions"] = {"python": platform.python_version(),
                       **{name: metadata.version(name) for name in ("pyarrow", "pygments", "playwright")}}
    out["cpu"] = f"{cpu_model()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at the end"
    out["platform"] = platform.platform()
    return out


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", type=int, default=40)
    p.add_argument("--evaluations", type=int, default=5000)
    p.add_argument("--islands", type=int, default=4)
    p.add_argument("--rows-per-part", type=int, default=3)
    p.add_argument("--refresh", type=int, default=25, help="evaluations recorded before the measured refresh")
    p.add_argument("--repeats", type=int, default=3, help="page loads measured")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
    p.add_argument("--report-html", action="store_true",
                   help="also write report.html for the run and time its opening")
    p.add_argument("--out", help="keep the run directory here (default: a temporary one, removed)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    out = measure(args)
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k}: {v}")
    return 0 if not out["page_errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
