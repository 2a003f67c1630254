"""Does a task's eager (and torch.compile) time depend on how much device memory is free?
Library convolutions choose their algorithm by the workspace they can get, so a baseline
timed while other lanes' workers hold most of the GPU may run slower than the same call on
an idle GPU. For each task: its reference model and one input set at the chosen sizes,
timed by the judge's protocol (`time_cuda`, TF32 off) with all memory free, then with a
ballast allocation that leaves only `--leave-gb` GiB free, each value in turn.

    python benchmarks/investigations/eager_memory_pressure.py --path DIR [--level 2] [--only SUBSTR ...]
        [--leave-gb 8 2] [--compile] [--out rows.json]

In-process and ad hoc: it tests a cause, the judge's figures come from the main job.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: task_args

from task_args import add_task_arguments, selected_tasks  # noqa: E402


def timed_ms(fn) -> float:
    from foundry.evaluate.cuda_timing import GpuTimingConfig, time_cuda
    return time_cuda(fn, config=GpuTimingConfig()).median_ms


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_task_arguments(ap)
    ap.add_argument("--leave-gb", type=float, nargs="+", default=[8.0, 2.0],
                    help="GiB left free by the ballast, one timing per value")
    ap.add_argument("--compile", action="store_true", help="also time torch.compile (default mode)")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    import torch
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    from foundry.evaluate.cuda_timing import apply_tf32_policy
    from foundry.tasks.loader import build_module
    apply_tf32_policy("off")
    print(f"device: {torch.cuda.get_device_name(0)}; torch {torch.__version__}", flush=True)
    rows = []
    for task in selected_tasks(a):
        started = time.time()
        module = build_module(task)
        torch.manual_seed(0)
        model = module.Model(*module.get_init_inputs()).cuda().eval()
        inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]
        calls = {"eager": lambda: model(*inputs)}
        if a.compile:
            compiled = torch.compile(model)
            calls["compile"] = lambda: compiled(*inputs)
        row = {"task": task.task_id}
        with torch.no_grad():
            for name, fn in calls.items():
                fn()
                row[f"{name}_free_ms"] = timed_ms(fn)
            for leave in a.leave_gb:
                torch.cuda.empty_cache()
                free = torch.cuda.mem_get_info()[0]
                size = int(free - leave * 2 ** 30)
                ballast = torch.empty(size, dtype=torch.uint8, device="cuda") if size > 0 else None
                for name, fn in calls.items():
                    try:
                        row[f"{name}_leave{leave:g}_ms"] = timed_ms(fn)
                    except torch.OutOfMemoryError as e:
                        row[f"{name}_leave{leave:g}_ms"] = None
                        row[f"{name}_leave{leave:g}_error"] = str(e)[:160]
                del ballast
        torch.cuda.empty_cache()
        row["seconds"] = round(time.time() - started, 1)
        rows.append(row)
        print(json.dumps(row), flush=True)
        del model, inputs, calls
    if a.out:
        with open(a.out, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
