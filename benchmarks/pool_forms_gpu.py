"""The two forms of the Triton pooling template side by side on a CUDA GPU, for every task
whose pooling window has the block-scan form (1-D, stride 1, a power-of-two number of
taps): the tile form (a window's taps loaded one by one, `POOL_SCAN=0`) and the block-scan
form (two loads per output, `POOL_SCAN=1`), each at every BLOCK of the template's tunable
list; in-process (CUDA events, L2 flushed, the median of the tuner's rounds), correctness
against the reference on one input set, the fraction of the roofline floor beside each.

    python benchmarks/pool_forms_gpu.py [--path DIR] [--level 1] [--only SUBSTR ...] [--profile full]
"""

from __future__ import annotations

import argparse
import sys


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--path", default=None, help="a folder of task files (default: the suite)")
    ap.add_argument("--level", type=int, nargs="*", default=None)
    ap.add_argument("--only", nargs="+", default=[""], help="keep tasks whose id contains any of these")
    ap.add_argument("--profile", default="full")
    ap.add_argument("--warps", type=int, nargs="+", default=[4, 8])
    a = ap.parse_args()

    import torch
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    from foundry.tasks.roofline import measure_ceilings, roofline_for_task
    from foundry.tasks.suite import load_suite
    from foundry.templates.engine import emit
    from foundry.tuning.inprocess import InProcessMeasure
    from foundry.tuning.space import read_tunable
    from foundry.types import Candidate

    ceilings = measure_ceilings("cuda")
    print(f"device: {torch.cuda.get_device_name(0)}; copy {ceilings.bandwidth_bytes_per_s / 1e12:.2f} TB/s; "
          f"torch {torch.__version__}", flush=True)
    tasks = [t for t in load_suite(path=a.path, level=a.level, profile=a.profile) if any(o in t.task_id for o in a.only)]
    for task in tasks:
        try:
            src = emit(task, backend="triton", variant="fused")
        except Exception:  # noqa: BLE001 - no template: not a pooling task
            continue
        space = read_tunable(src)
        if "POOL_SCAN" not in space:
            continue
        floor_ms = roofline_for_task(task, ceilings=ceilings).floor_ms
        measure = InProcessMeasure(task=task, device="cuda")
        print(f"{task.task_id}: floor {floor_ms:.4f} ms", flush=True)
        for scan in (1, 0):
            for warps in a.warps:
                for block in sorted(space["BLOCK"]):
                    params = {"BLOCK": block, "num_warps": warps, "POOL_SCAN": scan, "SPLIT": 1}
                    res = measure(Candidate.make(task_id=task.task_id, source=src, backend="triton", params=params))
                    if not res.correct:
                        print(f"  POOL_SCAN={scan} warps {warps} BLOCK {block:5d}: incorrect ({res.error[:200]})",
                              flush=True)
                        continue
                    print(f"  POOL_SCAN={scan} warps {warps} BLOCK {block:5d}: {res.runtime_ms:.4f} ms, "
                          f"{floor_ms / res.runtime_ms:.2f} of the floor, eager {res.eager_ms:.4f} ms", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
