"""Full-size GPU evaluation through the real judge (device cuda), run once on one GPU.

    python benchmarks/gpu_fullsize_check.py --out OUT_DIR [--repeats 4] [--budget-s 110]

Judges, with a warm worker: an honest Triton ReLU on 8192x16384 fp32 (512 MiB in and out),
an honest Triton row softmax on 4096x32768, and two exploits on the ReLU task that must
fail (an uninitialised `torch.empty_like` output; result reuse through the caching
allocator), then the honest ReLU again `--repeats` times for the warm-worker rate. Prints
one line per candidate (verdict, runtime, eval seconds, how outputs travelled) and writes
OUT_DIR/gpu_fullsize_check.json after every candidate. Exit status: 0 all verdicts right;
1 a wrong verdict; 2 the script itself failed; 3 no CUDA GPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
SUITE = ROOT / "benchmarks" / "suite" / "level1"
METRIC_KEYS = ("transfer_bytes", "transfer_note", "full_size_trials", "trials_run", "memory_cap_mb",
               "worker_peak_rss_mb", "worker_wall_s", "output_dtype")


def _mb(n) -> float:
    return round((n or 0) / (1 << 20), 1)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="directory for the JSON log")
    p.add_argument("--repeats", type=int, default=4, help="extra honest ReLU runs for the rate")
    p.add_argument("--budget-s", type=float, default=110.0, help="no new repeat starts after this")
    p.add_argument("--timeout", type=float, default=60.0, help="deadline per candidate (seconds)")
    p.add_argument("--isolation", choices=("auto", "none", "required"), default="auto")
    args = p.parse_args(argv)
    t_start = time.monotonic()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    log_path = out_dir / "gpu_fullsize_check.json"
    log: dict = {"script": "benchmarks/gpu_fullsize_check.py", "python": platform.python_version(),
                 "started_unix": time.time(), "cases": [], "repeats": [], "status": "running"}

    def write() -> None:
        log["elapsed_s"] = round(time.monotonic() - t_start, 2)
        tmp = log_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(log, indent=2, default=str))
        os.replace(tmp, log_path)

    try:
        import torch
        log["torch"] = torch.__version__
        if not torch.cuda.is_available():
            log["status"] = "no CUDA GPU"
            write()
            print("no CUDA GPU visible to torch", file=sys.stderr)
            return 3
        log["gpu"] = torch.cuda.get_device_name()
        try:
            import triton
            log["triton"] = triton.__version__
        except ImportError:
            log["triton"] = None

        import fullsize_candidates as fc
        from foundry.evaluate import EvalConfig, Evaluator
        from foundry.tasks import load_task
        from foundry.types import Candidate

        relu = load_task(SUITE / "08_ReLU.py", profile="full")  # 8192 x 16384
        softmax = dataclasses.replace(load_task(SUITE / "22_Softmax.py", profile="full"),
                                      size_overrides={"BATCH": 4096, "DIM": 32768})
        cfg = EvalConfig.from_config({
            "device": "cuda", "trials": 5, "timeout_s": args.timeout, "compile_baseline": False,
            "baseline_cache_dir": str(out_dir / "baselines"), "isolation": args.isolation,
            "baseline_timeout_s": 120.0})
        log["config"] = {k: v for k, v in dataclasses.asdict(cfg).items() if k != "secret_env_names"}
        cases = [("relu_triton_8192x16384", relu, fc.RELU, True),
                 ("softmax_triton_4096x32768", softmax, fc.SOFTMAX, True),
                 ("exploit_uninitialised_output", relu, fc.UNINITIALISED_OUTPUT, False),
                 ("exploit_allocator_result_reuse", relu, fc.ALLOCATOR_RESULT_REUSE, False)]
        wrong = 0
        t0 = time.monotonic()
        ev = Evaluator(config=cfg)
        log["evaluator_start_s"] = round(time.monotonic() - t0, 2)
        log["transfer_note"] = ev.transfer_note
        try:
            def judge(name, task, source, expect):
                w0 = time.monotonic()
                try:
                    r = ev.evaluate(task=task, candidate=Candidate.make(task_id=task.task_id, source=source,
                                                                        backend="triton"))
                except Exception as e:  # noqa: BLE001 - evaluate should never raise; record it
                    rec = {"name": name, "expected_correct": expect, "verdict_ok": False,
                           "exception": f"{type(e).__name__}: {e}", "wall_s": round(time.monotonic() - w0, 2)}
                    print(f"{name:34s} EXCEPTION {rec['exception'][:200]}", flush=True)
                    return rec
                m = r.metrics or {}
                rec = {"name": name, "task": task.task_id, "sizes": dict(task.size_overrides) or "full",
                       "expected_correct": expect, "correct": r.correct, "stage": r.stage,
                       "flags": list(r.flags), "runtime_ms": r.runtime_ms, "eager_ms": r.eager_ms,
                       "speedup_eager": r.speedup_eager, "eval_s": round(r.eval_s, 2),
                       "wall_s": round(time.monotonic() - w0, 2), "compile_s": r.compile_s,
                       "max_abs_err": r.max_abs_err, "error": (r.error or "")[:1500],
                       "metrics": {k: m.get(k) for k in METRIC_KEYS if k in m},
                       "verdict_ok": bool(r.correct) == expect}
                tb = m.get("transfer_bytes") or {}
                print(f"{name:34s} {'ok   ' if rec['verdict_ok'] else 'WRONG'} correct={r.correct!s:5s} "
                      f"stage={r.stage} flags={','.join(r.flags) or '-'} "
                      f"runtime={r.runtime_ms if r.runtime_ms is None else round(r.runtime_ms, 4)} ms "
                      f"eager={r.eager_ms if r.eager_ms is None else round(r.eager_ms, 4)} ms "
                      f"eval={r.eval_s:.2f} s  ipc={_mb(tb.get('cuda_ipc'))} MiB "
                      f"shm={_mb(tb.get('shm'))} MiB inline={_mb(tb.get('inline'))} MiB", flush=True)
                if not rec["verdict_ok"]:
                    print(f"    error: {(r.error or '')[:600]}", flush=True)
                return rec

            for name, task, source, expect in cases:
                rec = judge(name, task, source, expect)
                log["cases"].append(rec)
                wrong += not rec["verdict_ok"]
                write()
            for k in range(max(0, args.repeats)):
                if time.monotonic() - t_start > args.budget_s:
                    log["repeats_skipped"] = args.repeats - k
                    break
                rec = judge(f"relu_triton_repeat_{k}", relu, fc.RELU, True)
                log["repeats"].append(rec)
                wrong += not rec["verdict_ok"]
                write()
        finally:
            ev.close()
        done = [r for r in log["repeats"] if "eval_s" in r]
        if done:
            total = sum(r["eval_s"] for r in done)
            log["warm_rate_per_min"] = round(60.0 * len(done) / total, 1) if total > 0 else None
            print(f"warm worker: {len(done)} full-size ReLU evaluations, {total:.1f} s, "
                  f"{log['warm_rate_per_min']} candidates/minute", flush=True)
        log["wrong_verdicts"] = wrong
        log["status"] = "ok" if wrong == 0 else "wrong verdicts"
        write()
        print(f"total {time.monotonic() - t_start:.1f} s; wrong verdicts: {wrong}; log: {log_path}", flush=True)
        return 0 if wrong == 0 else 1
    except Exception as e:  # noqa: BLE001 - the log says what broke
        log["status"] = "script error"
        log["exception"] = f"{type(e).__name__}: {e}"
        log["traceback"] = traceback.format_exc()
        write()
        traceback.print_exc()
        return 2


if __name__ == "__main__":
    sys.exit(main())
