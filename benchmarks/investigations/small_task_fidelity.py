"""The judge's eager baseline of small, launch-scale GPU tasks against the same Model timed
in the judge's own process.

    python benchmarks/investigations/small_task_fidelity.py [--out DIR]     # on a CUDA GPU

Writes four GPT-2-sized task files (a bf16 and an fp32 addmm of 2048 x 768 @ 768 x 2304; a
bf16 and an fp32 tanh GELU of 2048 x 3072), asks an Evaluator for each task's eager
baseline (its worker, its timing protocol; no torch.compile baseline), and times the same
Model here with `foundry.extract.timing.interleaved_median_ms` (one synchronize per call,
so small kernels read high here) and with the judge's own `time_cuda` (its event median,
host median and host overhead, back-to-back time, and which of them it would judge by).
One JSON line per task: the times and the judge's ratio to the in-process one.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

ADDMM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """GPT-2 small's c_attn projection, batch 8 x 256 tokens, {dtype}."""

    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(2304, dtype=torch.{dtype}) * 0.1)
        self.weight = nn.Parameter(torch.randn(768, 2304, dtype=torch.{dtype}) * 0.02)

    def forward(self, x):
        return torch.addmm(self.bias, x, self.weight)


def get_inputs():
    return [torch.randn(2048, 768, dtype=torch.{dtype})]


def get_init_inputs():
    return []
'''

GELU = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """GPT-2's tanh GELU on its MLP activations, batch 8 x 256 tokens, {dtype}."""

    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * torch.pow(x, 3.0))))


def get_inputs():
    return [torch.randn(2048, 3072, dtype=torch.{dtype})]


def get_init_inputs():
    return []
'''


def write_tasks(folder: Path) -> list[Path]:
    paths = []
    for name, text in (("addmm", ADDMM), ("gelu_tanh", GELU)):
        for dtype in ("bfloat16", "float32"):
            path = folder / f"{name}_{dtype}.py"
            path.write_text(text.format(dtype=dtype))
            paths.append(path)
    return paths


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=None, help="where to write the task files (default: a temporary folder)")
    args = ap.parse_args()
    import torch

    from foundry.evaluate.config import EvalConfig
    from foundry.evaluate.cuda_timing import GpuTimingConfig, time_cuda
    from foundry.evaluate.evaluator import Evaluator
    from foundry.extract.timing import interleaved_median_ms
    from foundry.tasks.loader import build_module, load_task
    if not torch.cuda.is_available():
        raise SystemExit("needs a CUDA GPU")
    folder = Path(args.out or tempfile.mkdtemp(prefix="small-tasks-"))
    folder.mkdir(parents=True, exist_ok=True)
    cfg = EvalConfig.from_config({"device": "cuda", "compile_baseline": False})
    with Evaluator(config=cfg) as ev:
        for path in write_tasks(folder):
            task = load_task(path, profile="full")
            eager_ms, _ = ev.baselines(task=task)
            module = build_module(task)
            torch.manual_seed(0)
            model = module.Model(*module.get_init_inputs()).cuda().eval()
            inputs = [t.cuda() for t in module.get_inputs()]
            with torch.no_grad():
                here_ms = interleaved_median_ms([lambda: model(*inputs)], device="cuda")[0]
                t = time_cuda(lambda: model(*inputs), config=GpuTimingConfig())
            protocol = {"judged_ms": t.median_ms, "event_ms": t.event_median_ms, "host_ms": t.host_median_ms,
                        "host_overhead_ms": t.host_overhead_ms, "host_check_ok": t.host_check_ok,
                        "back_to_back_ms": t.back_to_back_ms, "launch_bound": t.launch_bound}
            print(json.dumps({"task": task.task_id, "judge_eager_ms": eager_ms, "in_process_ms": round(here_ms, 5),
                              "ratio": round(eager_ms / here_ms, 3) if eager_ms else None,
                              "time_cuda_here": {k: round(v, 5) if isinstance(v, float) else v
                                                 for k, v in protocol.items()}}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
