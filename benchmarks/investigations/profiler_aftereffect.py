"""Does one torch.profiler session slow the launches that come after it in the same process?

    python benchmarks/investigations/profiler_aftereffect.py          # on a CUDA GPU
    TEARDOWN_CUPTI=1 python benchmarks/investigations/profiler_aftereffect.py

Times a bf16 addmm (GPT-2 small's c_attn: 2048 x 768 @ 768 x 2304) and an fp32 add with the
judge's GPU timing (`time_cuda`: event median, back-to-back time per call, and which one it
judges by), twice before and twice after one `profile_kernels` session on each, plus a plain
loop of 2000 calls. The judge profiles baselines and some candidates' first trial; this is
why it does so after their timed runs, and why its workers set TEARDOWN_CUPTI=1.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> int:
    import torch

    from foundry.evaluate.cuda_device import profile_kernels
    from foundry.evaluate.cuda_timing import GpuTimingConfig, time_cuda
    if not torch.cuda.is_available():
        raise SystemExit("needs a CUDA GPU")
    torch.manual_seed(0)
    x = torch.randn(2048, 768, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(768, 2304, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(2304, device="cuda", dtype=torch.bfloat16)
    a = torch.randn(2048, 768, device="cuda")
    cases = {"addmm_bf16": lambda: torch.addmm(b, x, w), "add_fp32": lambda: a + a}

    def measure(tag: str) -> None:
        out = {}
        for name, fn in cases.items():
            t = time_cuda(fn, config=GpuTimingConfig(budget_ms=100))
            n = 2000
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            torch.cuda.synchronize()
            out[name] = {"judged_ms": round(t.median_ms, 4), "event_ms": round(t.event_median_ms, 4),
                         "b2b_ms": round(t.back_to_back_ms, 4), "launch_bound": t.launch_bound,
                         "loop_us_per_call": round((time.perf_counter() - t0) / n * 1e6, 2)}
        print(tag, json.dumps(out), flush=True)

    measure("before profiling")
    measure("before profiling, again")
    for fn in cases.values():
        profile_kernels(fn)
    measure("after one profile_kernels each")
    measure("after, again")
    return 0


if __name__ == "__main__":
    sys.exit(main())
