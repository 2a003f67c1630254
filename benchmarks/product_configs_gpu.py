"""Tile and float32-product choices of the matrix-product templates on a CUDA GPU: for each
task whose forward is a lone matmul, a chain of convolutions or an nn.Linear with a
pointwise epilogue, time a fixed list of configurations (dot_precision.F32_DOT x tile
shapes; for lone products also the first tile without the K-contiguous copy; for
convolutions also the first tile of each F32_DOT with one output phase per program
(ALL_PHASES off), which changes only a strided transposed convolution, and each tf32x3
tile with the kernel taps outermost (TAPS on) where the convolution has it; with
--switches, only each convolution's defaults and each kernel switch flipped) in-process
(CUDA events, L2 flushed, median of 30, TF32 off as the judge runs it) beside eager and
torch.compile, and print every configuration's time and the best.
It picks template defaults; the judge's figures come from the main job.

    python benchmarks/product_configs_gpu.py --path DIR [--level 1 2] [--only SUBSTR ...]
                                             [--time-limit 480] [--no-compile] [--tiles N] [--switches]
                                             [--out rows.csv]
"""

from __future__ import annotations

import argparse
import csv
import sys
import time

from task_args import add_task_arguments, selected_tasks

# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages), tried with every F32_DOT
TILES = [(128, 128, 32, 8, 3), (128, 128, 32, 4, 3), (128, 64, 32, 4, 4), (64, 128, 32, 4, 4),
         (256, 128, 32, 8, 3), (128, 128, 64, 8, 2)]
IEEE_TILES = [(64, 64, 32, 4, 3)]
# the convolution template's kernel switches (0 or 1 first in their TUNABLE)
CONV_SWITCHES = ("TAPS", "CHANNELS_LAST", "OUTER", "DW_TILE")


def configs(family: str, *, taps: bool = False, tiles: int = len(TILES)):
    """The configurations timed for a task of `family`; `taps`: the convolution's TUNABLE
    has TAPS (each tf32x3 tile is then also timed with it on); `tiles`: how many of TILES."""
    from foundry.templates.dot_precision import F32_DOT
    for dot in F32_DOT:
        for bm, bn, bk, warps, stages in (TILES[:tiles] if dot != "ieee" else IEEE_TILES):
            p = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "num_warps": warps, "num_stages": stages,
                 "F32_DOT": dot}
            if family in ("matmul", "linear"):
                p["GROUP_M"] = 8
            if family == "conv":
                p["ALL_PHASES"] = 1
            yield p
            if taps and dot != "ieee":
                yield {**p, "TAPS": 1}
    if family == "matmul":  # the first tile again, operands read as given (no K-contiguous copy)
        bm, bn, bk, warps, stages = TILES[0]
        yield {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "num_warps": warps, "num_stages": stages,
               "F32_DOT": F32_DOT[0], "GROUP_M": 8, "K_CONTIGUOUS": 0}
    if family == "conv":  # each product's first tile again, one output phase per program
        for dot in F32_DOT:
            bm, bn, bk, warps, stages = (TILES if dot != "ieee" else IEEE_TILES)[0]
            yield {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "num_warps": warps, "num_stages": stages,
                   "F32_DOT": dot, "ALL_PHASES": 0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_task_arguments(ap)
    ap.add_argument("--time-limit", type=float, default=480.0)
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile baseline")
    ap.add_argument("--out", default="")
    ap.add_argument("--tiles", type=int, default=len(TILES), help="time only the first N of TILES")
    ap.add_argument("--switches", action="store_true",
                    help="only convolutions with a kernel switch (CONV_SWITCHES): each at its default "
                         "parameters, then with each switch flipped")
    a = ap.parse_args()
    import torch
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    from foundry.templates.conv_triton import conv_tunable
    from foundry.templates.engine import coverage, describe_task, emit, variants
    from foundry.tuning.inprocess import InProcessMeasure
    from foundry.types import Candidate
    print(f"device: {torch.cuda.get_device_name(0)}; torch {torch.__version__}", flush=True)
    started, rows = time.time(), []
    for task in selected_tasks(a):
        if coverage(task):
            continue
        desc = describe_task(task)
        if desc.gemm is not None or desc.convs:
            family, variant = ("matmul" if desc.gemm is not None else "conv"), "fused"
        elif "matmul" in variants(task, "triton"):
            family, variant = "linear", "matmul"
        else:
            continue
        if time.time() - started > a.time_limit:
            print(f"time limit reached; stopping before {task.task_id}", flush=True)
            break
        try:
            measure = InProcessMeasure(task=task, device="cuda", compile_baseline=not a.no_compile)
        except Exception as e:  # noqa: BLE001 - report the task and go on
            print(f"{task.task_id}: reference failed: {type(e).__name__}: {str(e)[:200]}", flush=True)
            continue
        best = None
        space = conv_tunable(desc.convs) if family == "conv" else {}
        switches = [name for name in CONV_SWITCHES if name in space]
        if a.switches and not switches:
            continue
        if a.switches:
            defaults = {k: v[0] for k, v in space.items()}
            chosen = [defaults] + [{**defaults, name: 1 - int(defaults[name])} for name in switches]
        else:
            chosen = list(configs(family, taps="TAPS" in space, tiles=a.tiles))
        for params in chosen:
            src = emit(task, backend="triton", variant=variant, params=params)
            r = measure(Candidate.make(task_id=task.task_id, source=src, backend="triton", params=params))
            ms = r.runtime_ms if r.correct else None
            row = {"task": task.task_id, "family": family, **params, "ms": ms, "eager_ms": r.eager_ms,
                   "compile_ms": measure.compile_ms, "error": "" if r.correct else r.error[:160]}
            rows.append(row)
            print(f"  {task.task_id[:40]:40s} {params} " + (f"{ms:8.4f} ms" if ms else f"FAIL {row['error']}"),
                  flush=True)
            if ms and (best is None or ms < best[0]):
                best = (ms, params, r.eager_ms)
        if best:
            ms, params, eager = best
            comp = measure.compile_ms
            print(f"{task.task_id:42s} {family:6s} best {ms:8.4f} ms eager {eager:8.4f} compile "
                  f"{comp or float('nan'):8.4f}  vs eager {eager / ms:5.2f}x vs compile "
                  f"{(comp / ms) if comp else float('nan'):5.2f}x  {params}", flush=True)
        torch.cuda.empty_cache()
    if a.out:
        with open(a.out, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=sorted({k for r in rows for k in r}))
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
