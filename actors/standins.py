"""Stand-in parts for measuring the runtime itself (benchmarks/dispatch_bench.py,
benchmarks/scaling.py, runtime tests): an evaluator of fixed cost and a proposer that
returns fixed valid `c` candidates. Selected only by `run.evaluator_impl` /
`run.proposer_impl`; a normal run never uses them.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable, Mapping

from foundry.types import Candidate, EvalResult, ProposalRequest, Stage, Task, content_hash

C_COPY = r'''
#include <stdint.h>
void copy_f32(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = x[i];
}
'''

_WRAPPER = '''

# --- candidate: the reference's forward, its float32 output copied by a C kernel ---
import torch as _torch
from foundry.kernels import c as _c

TUNABLE = {{"UNROLL": [1, 2, 4]}}
PARAMS = {{"UNROLL": {unroll}}}
_LIB = _c.build(r"""{csrc}""")


class ModelNew(Model):
    def forward(self, *args):
        out = super().forward(*args).contiguous()
        y = _torch.empty_like(out)
        _LIB.copy_f32(out, y, out.numel())
        return y
# variant {variant}
'''


def copy_candidate_source(task: Task, variant: int) -> str:
    """A valid `c` candidate for a task whose output is one float32 tensor."""
    return task.source + _WRAPPER.format(unroll=[1, 2, 4][variant % 3], csrc=C_COPY, variant=variant)


class FixedCostEvaluator:
    """Takes `cost_s` per candidate (sleeping, so it costs no CPU) and returns a correct
    result whose speedup is derived from the candidate id (deterministic)."""

    def __init__(self, *, config: Mapping[str, Any] | None = None):
        self.cost_s = float((config or {}).get("cost_s", 0.0))

    def evaluate(self, *, task: Task, candidate: Candidate) -> EvalResult:
        if self.cost_s:
            time.sleep(self.cost_s)
        speed = 0.5 + int(candidate.candidate_id[:4], 16) / 65535 * 1.5
        return EvalResult(candidate_id=candidate.candidate_id, task_id=task.task_id,
                          stage=int(Stage.CORRECT), correct=True, runtime_ms=1.0 / speed,
                          eager_ms=1.0, compile_ms=0.8, speedup_eager=speed,
                          speedup_compile=speed * 0.8, eval_s=self.cost_s, hardware="stand-in")

    def baselines(self, *, task: Task) -> dict:
        return {"eager_ms": 1.0, "compile_ms": 0.8}

    def close(self) -> None:
        return None


class CopyKernelProposer:
    """Returns a new valid `c` candidate per call (the copy-kernel wrapper, numbered)."""

    def __init__(self, *, on_llm_call: Callable[[Any], None] | None = None, island_index: int = 0,
                 **_: Any):
        self.island_index, self.count = island_index, 0

    async def propose(self, request: ProposalRequest) -> Candidate:
        await asyncio.sleep(0)
        self.count += 1
        variant = int(content_hash(f"{request.island_id}/{request.generation}/{request.seed}/{self.count}"), 16) % 10**9
        source = copy_candidate_source(request.task, variant)
        return Candidate.make(task_id=request.task.task_id, source=source, backend=request.backend,
                              params={"UNROLL": [1, 2, 4][variant % 3]}, island_id=request.island_id,
                              generation=request.generation, origin="template",
                              strategy_id=request.prompt_id or "copy-kernel")

    async def aclose(self) -> None:
        return None


def fixed_cost_evaluator(*, config: Mapping[str, Any] | None = None) -> FixedCostEvaluator:
    return FixedCostEvaluator(config=config)


def copy_kernel_proposer(**kw: Any) -> CopyKernelProposer:
    return CopyKernelProposer(**kw)
