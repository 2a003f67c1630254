"""`python -m foundry.evaluate TASK_FILE CANDIDATE_FILE [--device cpu|cuda] [--trials N]
[--allow-torch-ops] [--json]`: judge one candidate file on one task file.

Exit status: 0 whenever an evaluation completed, whatever the verdict; 2 for bad usage or
an unreadable task or candidate file (with a one-line reason on stderr). With --json the
last line of stdout is one JSON object (correct, stage, flags, runtime_ms, baseline_ms,
speedup, error, and more); without it, a short readable verdict.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys

BACKEND_HINTS = (("cuda_inline", r"\bload_inline\s*\("), ("triton", r"@\s*triton\.(jit|autotune)"),
                 ("cuda", r"foundry\.kernels(\.cuda\b|\s+import\s+[^\n]*\bcuda\b)"), ("c", r"."))


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        sys.stderr.write(f"error: {message}\n")
        raise SystemExit(2)


def guess_backend(source: str) -> str:
    for name, pattern in BACKEND_HINTS:
        if re.search(pattern, source, re.M):
            return name
    return "c"


def _judge(p: _Parser, args: argparse.Namespace, cfg, worker, *, source: str, backend: str, note: str):
    """(the result, the task) of judging the candidate `source` with `worker` started."""
    from foundry.tasks.loader import TaskError, load_task
    from foundry.types import Candidate
    try:
        task = load_task(args.task_file, profile=args.profile or ("small" if args.device == "cpu" else "full"))
    except TaskError as e:
        p.error(str(e).replace("\n", " "))
    from foundry.evaluate.evaluator import Evaluator
    try:
        ev = Evaluator(config=cfg, backends=(backend,), worker=worker)
    except Exception as e:  # noqa: BLE001 - e.g. device "cuda" without its implementation
        p.error(str(e).replace("\n", " "))
    cand = Candidate.make(task_id=task.task_id, source=source, backend=backend, note=note)
    try:
        return ev.evaluate(task=task, candidate=cand), task
    finally:
        ev.close()


def _num(x):
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else x


def main(argv: list[str] | None = None) -> int:
    p = _Parser(prog="python -m foundry.evaluate", description="Judge a candidate kernel file on a task file.")
    p.add_argument("task_file")
    p.add_argument("candidate_file")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--trials", type=int, default=None, help="correctness trials (fresh inputs each)")
    p.add_argument("--allow-torch-ops", action="store_true",
                   help="judge pure-PyTorch rewrites on correctness and exploit guards alone")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    p.add_argument("--backend", choices=("c", "triton", "cuda", "cuda_inline"), default=None,
                   help="the candidate's backend (default: read from its source)")
    p.add_argument("--profile", choices=("small", "full"), default=None,
                   help="task size profile (default: small on cpu, full on cuda)")
    p.add_argument("--timeout", type=float, default=None, help="deadline per candidate run, seconds")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--no-compile-baseline", action="store_true", help="skip the torch.compile baseline")
    p.add_argument("--isolation", choices=("auto", "none", "required"), default=None,
                   help="read-only filesystem, no network, no capabilities for the candidate "
                        "(auto: when running as root)")
    p.add_argument("--gpu-profile", action="store_true",
                   help="cuda: Nsight Compute metrics of the candidate's own kernels (SM and DRAM "
                        "throughput, achieved occupancy, L2 hit rate; timing only where ncu cannot "
                        "read the counters). The roofline fraction is reported on cuda always")
    args = p.parse_args(argv)
    if args.trials is not None and args.trials < 1:
        p.error(f"--trials must be >= 1, got {args.trials}")

    note = ""
    try:
        with open(args.candidate_file, "rb") as f:
            raw = f.read()
    except OSError as e:
        p.error(f"cannot read candidate file {args.candidate_file}: {e.strerror or e}")
    try:
        source = raw.decode("utf-8")
    except UnicodeDecodeError:  # a bad candidate, not bad usage: judged stage syntax
        source, note = "", "the candidate file is not UTF-8 text"
    backend = args.backend or guess_backend(source)

    from foundry.evaluate.config import EvalConfig
    conf = {"device": args.device, "allow_torch_ops": args.allow_torch_ops}
    for key, val in (("trials", args.trials), ("timeout_s", args.timeout), ("seed", args.seed),
                     ("threads", args.threads)):
        if val is not None:
            conf[key] = val
    if args.no_compile_baseline:
        conf["compile_baseline"] = False
    if args.isolation:
        conf["isolation"] = args.isolation
    try:
        cfg = EvalConfig.from_config(conf)
    except Exception as e:  # noqa: BLE001 - a bad value: named in the message
        p.error(str(e).replace("\n", " "))
    # the warm worker imports torch and the backend while this process does the same
    from foundry.evaluate.warm_worker import warm_worker_for
    worker = warm_worker_for(cfg, backends=(backend,))
    worker.launch()
    try:
        r, task = _judge(p, args, cfg, worker, source=source, backend=backend, note=note)
    finally:
        worker.close()  # the Evaluator closed it already, unless something failed before
    from foundry.types import Stage
    stage = Stage(r.stage).label
    gpu: dict = {}
    if args.device == "cuda":
        from foundry import hardware
        gpu = hardware.candidate_report(task=task, candidate_path=args.candidate_file, source=source,
                                        backend=backend, runtime_ms=r.runtime_ms,
                                        ncu=args.gpu_profile and r.correct)
    if args.json:
        obj = {"correct": bool(r.correct), "stage": stage, "flags": list(r.flags),
               "runtime_ms": _num(r.runtime_ms), "baseline_ms": _num(r.eager_ms),
               "speedup": _num(r.speedup_eager), "error": r.error,
               "runtime_spread": _num(r.runtime_spread), "compile_baseline_ms": _num(r.compile_ms),
               "speedup_compile": _num(r.speedup_compile), "max_abs_err": _num(r.max_abs_err),
               "max_rel_err": _num(r.max_rel_err), "backend": backend, "task_id": r.task_id,
               "candidate_id": r.candidate_id, "device": r.device, "hardware": r.hardware,
               "compile_s": r.compile_s, "eval_s": r.eval_s, "phases": r.metrics.get("phases", {}),
               "phase_parts": {k: r.metrics[k] for k in ("task_setup_parts_s", "worker_start_parts_s", "trial_parts_s")
                               if k in r.metrics}, "gpu": gpu}
        sys.stdout.write(json.dumps(obj) + "\n")
    else:
        verdict = "CORRECT" if r.correct else f"FAILED at stage {stage}"
        print(f"{verdict}  ({r.task_id}, backend {backend}, {r.hardware})")
        if r.flags:
            print("flags: " + ", ".join(r.flags))
        if r.runtime_ms is not None:
            line = f"runtime {r.runtime_ms:.4g} ms"
            if r.eager_ms:
                line += f"; eager {r.eager_ms:.4g} ms, speedup {r.speedup_eager:.3g}x"
            if r.compile_ms:
                line += f"; torch.compile {r.compile_ms:.4g} ms, speedup {r.speedup_compile:.3g}x"
            print(line)
        if r.error:
            print("error: " + r.error[:1500])
        phases = sorted((r.metrics.get("phases") or {}).items(), key=lambda kv: -kv[1])
        if phases:
            print(f"judged in {r.eval_s:.2f} s: " + ", ".join(f"{k} {v:.2f} s" for k, v in phases[:6]))
        for key, val in gpu.items():
            print(f"{key}: {val:.4g}" if isinstance(val, float) else f"{key}: {val}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
