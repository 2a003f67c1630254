"""A real in-process measurement for CPU tuning and benchmarks (not the judge): build
the candidate with the given PARAMS, check it against the reference on the same inputs,
then time eager and the candidate in interleaved rounds (median of per-round means).

The runtime passes the sandboxed evaluator's `Evaluator.evaluate` to the tuner instead;
this one is for tests and scripts where a trusted, fast measurement is enough.
"""

from __future__ import annotations

import importlib.util
import os
import statistics
import time
import types

import torch

from foundry.evaluate.compare import compare, tolerance
from foundry.tasks.loader import build_module
from foundry.kernels import cache_dir
from foundry.types import Candidate, EvalResult, Stage, Task, content_hash


def load_candidate(source: str, params: dict, *, name: str = "foundry_candidate") -> types.ModuleType:
    """Execute a candidate file with PARAMS set the way the evaluator sets it."""
    # Run it from a real file: Triton's JIT reads kernel source through `inspect`, which
    # needs a file behind the code object (exec of a string works only in the interpreter).
    path = cache_dir("candidates") / f"{name}_{content_hash(source)}.py"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(source)
        os.replace(tmp, path)
    spec = importlib.util.spec_from_file_location(f"{name}_{content_hash(source)}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    merged = dict(getattr(mod, "PARAMS", {}) or {})
    tunable = getattr(mod, "TUNABLE", {}) or {}
    for k, v in tunable.items():
        merged.setdefault(k, v[0])
    merged.update(params or {})
    mod.PARAMS = merged
    return mod


class InProcessMeasure:
    """`measure(candidate) -> EvalResult`, comparing with the reference on one input set
    the way the judge compares (`foundry.evaluate.compare`)."""

    def __init__(self, *, task: Task, seed: int = 0, rounds: int = 7, block_s: float = 0.01,
                 atol: float | None = None, rtol: float | None = None, device: str = "cpu",
                 compile_baseline: bool = False, tf32: str = "off"):
        self.task, self.seed, self.rounds, self.block_s = task, seed, rounds, block_s
        self.device = torch.device(device)
        if self.device.type == "cuda":  # the judge's policy (EvalConfig.tf32), not torch's defaults
            from foundry.evaluate.cuda_timing import apply_tf32_policy
            apply_tf32_policy(tf32)
        self.compile_baseline = compile_baseline
        self.compile_ms: float | None = None
        self.compile_error = ""
        module = build_module(task)
        self.init = list(module.get_init_inputs())
        torch.manual_seed(seed)
        self.reference = module.Model(*self.init).to(self.device).eval()  # as the judge runs it
        torch.manual_seed(seed + 1)
        self.inputs = [x.to(self.device) if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]
        with torch.no_grad():
            self.expected = self.reference(*self.inputs)
        # the judge's tolerance: the task's, else its default for the output's dtype
        dtype = self.expected.dtype if isinstance(self.expected, torch.Tensor) else torch.float32
        task_atol, task_rtol = tolerance(dtype, task.atol, task.rtol)
        self.atol = atol if atol is not None else task_atol
        self.rtol = rtol if rtol is not None else task_rtol
        self._eager_ms: float | None = None
        self._flush = (torch.empty(64 << 20, dtype=torch.float32, device=self.device)
                       if self.device.type == "cuda" else None)

    def _fail(self, cand: Candidate, stage: Stage, error: str) -> EvalResult:
        return EvalResult(candidate_id=cand.candidate_id, task_id=cand.task_id, stage=int(stage),
                          correct=False, error=error[:2000], hardware=_hardware())

    def __call__(self, cand: Candidate) -> EvalResult:
        t0 = time.perf_counter()
        try:
            mod = load_candidate(cand.source, cand.params)
            torch.manual_seed(self.seed)
            model = mod.ModelNew(*self.init).to(self.device).eval()
        except Exception as e:  # noqa: BLE001 - a broken candidate is a result, not a crash
            return self._fail(cand, Stage.COMPILE, f"{type(e).__name__}: {e}")
        try:
            with torch.no_grad():
                got = model(*self.inputs)
        except Exception as e:  # noqa: BLE001
            return self._fail(cand, Stage.RUNTIME, f"{type(e).__name__}: {e}")
        # the judge's comparison (its atol scaled by the reference's RMS), so a sweep or the
        # tuner's screen accepts what the judge accepts and refuses what it refuses
        verdict = compare(self.expected, got, atol=self.atol, rtol=self.rtol)
        if not verdict.ok:
            return self._fail(cand, Stage.SHAPE if verdict.kind == "shape" else Stage.VALUE, verdict.message)
        if self.device.type == "cuda":
            if self._eager_ms is None:
                self._eager_ms = self._cuda_ms(lambda: self.reference(*self.inputs))
                if self.compile_baseline:
                    self.compile_ms = self._compiled_ms()
            eager_ms, cand_ms = self._eager_ms, self._cuda_ms(lambda: model(*self.inputs))
        else:
            eager_ms, cand_ms = self._time(lambda: self.reference(*self.inputs), lambda: model(*self.inputs))
        return EvalResult(candidate_id=cand.candidate_id, task_id=cand.task_id, stage=int(Stage.CORRECT),
                          correct=True, max_abs_err=verdict.max_abs_err, runtime_ms=cand_ms,
                          eager_ms=eager_ms, speedup_eager=eager_ms / cand_ms, compile_ms=self.compile_ms,
                          speedup_compile=(self.compile_ms / cand_ms) if self.compile_ms else None,
                          eval_s=time.perf_counter() - t0, hardware=_hardware(self.device),
                          device=self.device.type)

    def _compiled_ms(self) -> float | None:
        """torch.compile's time for the reference (None when it cannot compile it)."""
        compiled = torch.compile(self.reference)
        try:
            return self._cuda_ms(lambda: compiled(*self.inputs))
        except Exception as e:  # noqa: BLE001 - a baseline that fails is reported as missing
            self.compile_error = f"{type(e).__name__}: {str(e)[:200]}"
            return None

    def _cuda_ms(self, fn, trials: int = 30) -> float:
        """CUDA events around each call, L2 flushed (a 256 MB write) before each, median."""
        with torch.no_grad():
            for _ in range(3):
                fn()
            torch.cuda.synchronize(self.device)
            times = []
            for _ in range(trials):
                self._flush.zero_()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                torch.cuda.synchronize(self.device)
                times.append(start.elapsed_time(end))
        return statistics.median(times)

    def _time(self, eager, cand) -> tuple[float, float]:
        with torch.no_grad():
            n = _calls_per_block(cand, self.block_s)
            m = _calls_per_block(eager, self.block_s)
            e_ms, c_ms = [], []
            for _ in range(self.rounds):
                e_ms.append(_block(eager, m))
                c_ms.append(_block(cand, n))
        return statistics.median(e_ms), statistics.median(c_ms)


def _calls_per_block(fn, block_s: float) -> int:
    fn()
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-6)
    return max(1, min(10000, int(block_s / one)))


def _block(fn, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e3


def _hardware(device: torch.device | None = None) -> str:
    if device is not None and device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu:{torch.get_num_threads()}-threads"
