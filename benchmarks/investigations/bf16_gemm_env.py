"""Which of the judge's worker settings slows a small bf16 GEMM (the judge times GPT-2's
c_attn addmm at 0.25 ms; a plain process at 0.015-0.02 ms per call back to back)?

    python benchmarks/investigations/bf16_gemm_env.py      # on a CUDA GPU

Times the addmm with the judge's GPU timing in a fresh process per environment (as is;
with the workers' CUBLAS_WORKSPACE_CONFIG; with that and TEARDOWN_CUPTI=1), each time
plainly, with torch.use_deterministic_algorithms on (as during poisoned trials), and off
again. One JSON line per environment: [judged ms, event median ms] per step.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CODE = r'''
import json, sys, torch
sys.path.insert(0, sys.argv[1])
from foundry.evaluate.cuda_timing import GpuTimingConfig, time_cuda
x = torch.randn(2048, 768, device="cuda", dtype=torch.bfloat16)
w = torch.randn(768, 2304, device="cuda", dtype=torch.bfloat16)
b = torch.randn(2304, device="cuda", dtype=torch.bfloat16)
out = {}
def step(tag):
    r = time_cuda(lambda: torch.addmm(b, x, w), config=GpuTimingConfig(budget_ms=100))
    out[tag] = [round(r.median_ms, 4), round(r.event_median_ms, 4)]
step("plain")
torch.use_deterministic_algorithms(True, warn_only=True)
step("deterministic on")
torch.use_deterministic_algorithms(False)
step("deterministic off again")
print(json.dumps(out), flush=True)
'''

ENVS = ({}, {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"}, {"CUBLAS_WORKSPACE_CONFIG": ":4096:8", "TEARDOWN_CUPTI": "1"})


def main() -> int:
    for env in ENVS:
        print(json.dumps({"env": env}), flush=True)
        subprocess.run([sys.executable, "-c", CODE, str(ROOT)], env={**os.environ, **env}, timeout=120, check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
