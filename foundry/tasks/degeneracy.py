"""Is a task worth optimising? Degeneracy, measured with the judge's own comparison.

A task is degenerate when a kernel could pass the judge without computing the function:
when an answer that does not depend on the inputs would pass the same comparison
(`foundry.evaluate.compare.compare`, with the task's tolerance) that the judge applies on
fresh inputs, or when one input can be swapped while the output moves by less than a
tenth of the tolerance (an input that moves it within the tolerance, but measurably, is
checked by the judge instead: see (d)). `check_task` runs the reference on `trials`
(>= 3) seeded input sets built by the judge's own generator (`make_trial_inputs`, the
trial plan's standard and heavy-tailed distributions) on the given device and asks:

(a) other inputs: does some set's output pass against every other set's output (the
    judge's trials include heavy-tailed inputs, so an answer must pass those too)?
(b) mean output: does the element-wise mean over the sets pass against every set?
(c) constant: does one value everywhere (the outputs' mean, their mid-range, or zero)
    pass against every set?
(d) ignored input: for each tensor input i, does the output on set 0 with input i taken
    from another standard set, and with it taken from the heavy-tailed set, pass against
    the output on set 0 both times? If so, and the larger of the two changes (its swap
    excess: error / tolerance, as below) is under DIFFERENTIAL_FLOOR (0.1), input i is
    ignored and the task is degenerate. If the swap excess is at least the floor (the
    output does depend on input i, only within the tolerance, as a loss averaged over
    many rows depends on its integer targets), the task is not flagged for it: input i
    is listed in `differential_inputs` (the reasons in `differential_reason`), and the
    judge checks differentially that a candidate uses it (an extra trial with only input
    i redrawn, see foundry/evaluate/README.md, guard `input_ignored`). Under the floor an
    honest kernel's float noise could swamp that check. (An input that is the same in
    every set, e.g. a fixed index tensor, is not tested.)
(e) the output is empty, is NaN/Inf on the task's own (standard) inputs, or the
    reference raises.

`details` holds the figures: for each input-independent answer its largest error as a
multiple of what the comparison allows (<= 1 passes; the element-wise rule of
`compare`: |answer - output| <= atol * scale + rtol * |output|, scale the output's RMS,
at least 1), the best of them, the same figure for each input swap (`swaps`: the larger
of its two swaps), and the differential inputs with the floor (`differential_inputs`,
`differential_floor`). A 4096-wide matmul of uniform inputs varies by about 1.5% of its
magnitude, far beyond the float32 tolerance: its best input-independent answer misses by
tens of times the tolerance.

Everything runs on the check's device and is reduced to scalars there (outputs are never
copied to the host). Peak memory: `trials` outputs plus one answer buffer, with one input
set at a time while they are computed; then one output and two input sets per swap.
Running out of memory is no verdict: it raises `DegeneracyCheckError`.
"""

from __future__ import annotations

import gc
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping

import torch

from foundry.evaluate.compare import CHUNK_CPU, CHUNK_CUDA, compare, tolerance
from foundry.evaluate.trial_inputs import make_trial_inputs
from foundry.tasks.inputs import InputSpec, build_device, make_init_inputs, seeded, trial_plan
from foundry.tasks.loader import build_module
from foundry.types import Task

CHECK_VERSION = 4  # part of cached verdicts' keys: bump it when the rules change
MIN_TRIALS = 3  # two standard sets (for the swaps) and one heavy-tailed
DEFAULT_SEED = 1234
CLEAR_MISS = 2.0  # an answer off by more than this many tolerances certainly fails `compare`
# an input whose swaps stay within the tolerance but move the output by at least this many
# tolerances is checked differentially by the judge; one that moves it less is ignored
DIFFERENTIAL_FLOOR = 0.1


@dataclass(frozen=True)
class DegeneracyReport:
    """The verdict for one task. `details` holds the measured figures (plain values)."""

    task_id: str
    degenerate: bool
    reason: str = ""  # empty when not degenerate; else every failed check, "; "-joined
    details: dict = field(default_factory=dict)
    # tensor inputs that move the output only within the tolerance, by at least
    # DIFFERENTIAL_FLOOR tolerances: the judge checks that a candidate uses them
    differential_inputs: tuple[int, ...] = ()
    differential_reason: str = ""  # why each of them is checked differentially, "; "-joined


class DegeneracyCheckError(RuntimeError):
    """The check could not run to the end (e.g. out of memory): no verdict either way."""


class _ReferenceFailure(Exception):
    """The task's own code (module, inputs or forward) raised: the verdict is degenerate."""


# ------------------------------------------------------------------ output trees
def _tree(out: Any) -> Any:
    """A forward's result with tensors detached, sequences as tuples, dict keys as str."""
    if isinstance(out, torch.Tensor):
        return out.detach()
    if isinstance(out, (tuple, list)):
        return tuple(_tree(o) for o in out)
    if isinstance(out, Mapping):
        return {str(k): _tree(v) for k, v in out.items()}
    return out


def _leaves(tree: Any) -> list:
    if isinstance(tree, tuple):
        return [leaf for t in tree for leaf in _leaves(t)]
    if isinstance(tree, dict):
        return [leaf for t in tree.values() for leaf in _leaves(t)]
    return [tree]


def _rebuild(tree: Any, leaves: Iterator) -> Any:
    if isinstance(tree, tuple):
        return tuple(_rebuild(t, leaves) for t in tree)
    if isinstance(tree, dict):
        return {k: _rebuild(t, leaves) for k, t in tree.items()}
    return next(leaves)


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _inexact(t: torch.Tensor) -> bool:
    return t.is_floating_point() or t.is_complex()


def _chunks(t: torch.Tensor) -> Iterator[torch.Tensor]:
    flat = t.reshape(-1)
    step = CHUNK_CPU if flat.device.type == "cpu" else CHUNK_CUDA
    for s in range(0, flat.numel(), step):
        yield flat[s:s + step]


def _work(dtype: torch.dtype) -> torch.dtype:
    return dtype if dtype in (torch.float64, torch.complex128, torch.complex64) else torch.float32


# ------------------------------------------------------------------ the comparison's figure
def tolerance_excess(ref: Any, got: Any, *, atol: float | None, rtol: float | None) -> float:
    """The largest error of `got` against `ref` as a multiple of what `compare` allows
    there (|got - ref| / (atol * scale + rtol * |ref|), scale = max(1, RMS of ref's finite
    values), per tensor): <= 1 where the comparison passes. inf for a different structure,
    shape or dtype, NaN/Inf that do not match the reference's, or differing exact values."""
    refs, gots = _leaves(ref), _leaves(got)
    if len(refs) != len(gots):
        return math.inf
    worst = 0.0
    for r, g in zip(refs, gots):
        if _is_number(r) and _is_number(g):
            a, rt = atol or 1e-6, rtol or 1e-6  # as compare treats plain numbers
            r, g = torch.tensor(float(r), dtype=torch.float64), torch.tensor(float(g), dtype=torch.float64)
            worst = max(worst, _tensor_excess(r, g, a, rt))
        elif isinstance(r, torch.Tensor) and isinstance(g, torch.Tensor):
            a, rt = tolerance(r.dtype, atol, rtol)
            worst = max(worst, _tensor_excess(r, g, a, rt))
        elif r != g:
            return math.inf
    return worst


def _tensor_excess(ref: torch.Tensor, got: torch.Tensor, atol: float, rtol: float) -> float:
    if ref.shape != got.shape or ref.dtype != got.dtype:
        return math.inf
    got = got.to(ref.device)
    if ref.numel() == 0:
        return 0.0
    if not _inexact(ref):
        return 0.0 if bool(torch.equal(ref, got)) else math.inf
    work = _work(ref.dtype)
    sumsq, n_fin = 0.0, 0
    for rc in _chunks(ref):
        ra = rc.to(work)
        ra = ra.abs() if ra.is_complex() else ra
        lo, hi = (float(t) for t in torch.aminmax(ra))  # NaN and Inf propagate
        top = max(abs(lo), abs(hi))
        if not (math.isfinite(lo) and math.isfinite(hi)):
            fin = torch.isfinite(ra)
            n_fin += int(fin.sum())
            ra = torch.where(fin, ra, torch.zeros((), dtype=ra.dtype, device=ra.device))
            top = float(ra.abs().max())
        else:
            n_fin += ra.numel()
        sumsq += float(torch.dot(ra, ra)) if top < 1e15 or ra.dtype == torch.float64 \
            else float(ra.double().pow(2).sum())
    allowed = atol * (max(1.0, math.sqrt(sumsq / n_fin)) if n_fin else 1.0)
    worst = 0.0
    for rc, gc_ in zip(_chunks(ref), _chunks(got)):
        r, g = rc.to(work), gc_.to(work)
        lim = r.abs().mul_(rtol).add_(allowed).clamp_min_(1e-300 if work != torch.float32 else 1e-30)
        ratio = (g - r).abs().div_(lim)
        top = float(ratio.max())
        if not math.isfinite(top):  # NaN/Inf somewhere (or an overflow): only matching ones are fine
            rf, gf = torch.isfinite(r), torch.isfinite(g)
            both = rf & gf
            special = ~rf & ((r == g) | (torch.isnan(r) & torch.isnan(g)))
            if not bool((both | special).all()):
                return math.inf  # NaN/Inf where the reference is finite, or different NaN/Inf
            top = float(torch.where(both, ratio, torch.zeros((), dtype=ratio.dtype, device=ratio.device)).max())
        worst = max(worst, top)
    return worst


# ------------------------------------------------------------------ input-independent answers
def _mean_answer(outs: list) -> Any:
    """The element-wise mean over the sets' outputs (rounded for integer, majority for bool)."""
    def leaf(values: list) -> Any:
        first = values[0]
        if _is_number(first):
            return sum(float(v) for v in values) / len(values)
        if not isinstance(first, torch.Tensor):
            return first
        acc_dtype = first.dtype if first.dtype in (torch.float64, torch.complex128, torch.complex64) \
            else (torch.float64 if not _inexact(first) and first.dtype != torch.bool else torch.float32)
        acc = torch.zeros_like(first, dtype=acc_dtype)
        for v in values:
            acc.add_(v)
        acc.div_(len(values))
        if first.dtype == torch.bool:
            return acc >= 0.5
        if not _inexact(first):
            acc.round_()
        return acc if acc.dtype == first.dtype else acc.to(first.dtype)
    per_set = [_leaves(o) for o in outs]
    return _rebuild(outs[0], iter(leaf([s[i] for s in per_set]) for i in range(len(per_set[0]))))


def _stats(values: list) -> tuple[float, float, float] | None:
    """(mean, min, max) of the finite values of one leaf over every set, or None."""
    total, count, lo, hi = 0.0, 0, math.inf, -math.inf
    for v in values:
        if _is_number(v):
            if math.isfinite(float(v)):
                total, count, lo, hi = total + float(v), count + 1, min(lo, float(v)), max(hi, float(v))
            continue
        if not isinstance(v, torch.Tensor) or v.is_complex() or v.numel() == 0:
            continue
        for c in _chunks(v):
            x = c if c.is_floating_point() else c.to(torch.float64)
            c_lo, c_hi = (float(t) for t in torch.aminmax(x))
            if not (math.isfinite(c_lo) and math.isfinite(c_hi)):
                x = x[torch.isfinite(x)]
                if x.numel() == 0:
                    continue
                c_lo, c_hi = (float(t) for t in torch.aminmax(x))
            total += float(x.sum(dtype=torch.float64))
            count += x.numel()
            lo, hi = min(lo, c_lo), max(hi, c_hi)
    return (total / count, lo, hi) if count else None


def _constant_answer(outs: list, pick: Callable[[tuple[float, float, float] | None], float]) -> Any:
    """One value everywhere per output tensor: `pick` chooses it from that tensor's
    (mean, min, max) over every set."""
    def leaf(values: list) -> Any:
        first = values[0]
        value = pick(_stats(values))
        if _is_number(first):
            return value
        if not isinstance(first, torch.Tensor):
            return first
        if first.dtype == torch.bool:
            return torch.full_like(first, value >= 0.5)
        if not _inexact(first):
            return torch.full_like(first, round(value))
        return torch.full_like(first, value)
    per_set = [_leaves(o) for o in outs]
    return _rebuild(outs[0], iter(leaf([s[i] for s in per_set]) for i in range(len(per_set[0]))))


CONSTANTS: dict[str, Callable] = {
    "constant_mean": lambda s: s[0] if s else 0.0,
    "constant_midrange": lambda s: (s[1] + s[2]) / 2 if s else 0.0,
    "zero": lambda s: 0.0,
}


def _figure(x: float) -> float | str:
    return "inf" if not math.isfinite(x) else float(f"{x:.4g}")


# ------------------------------------------------------------------ running the reference
def _out_of_memory(e: BaseException) -> bool:
    text = str(e)
    return isinstance(e, (MemoryError, torch.OutOfMemoryError)) or "out of memory" in text.lower() \
        or "can't allocate memory" in text


def _reference(call: Callable[[], Any]) -> Any:
    """Run the task's own code; its failures become `_ReferenceFailure` (out of memory is
    passed on: it says nothing about the task)."""
    try:
        return call()
    except Exception as e:  # noqa: BLE001 - any failure of the task's code
        if _out_of_memory(e):
            raise
        raise _ReferenceFailure(f"{type(e).__name__}: {e}") from None


def _release(device: str) -> None:
    gc.collect()
    if torch.device(device).type == "cuda":
        torch.cuda.empty_cache()


def check_task(task: Task, *, trials: int = MIN_TRIALS, overrides: Mapping[str, Any] | None = None,
               seed: int = DEFAULT_SEED, device: str = "cpu", atol: float | None = None,
               rtol: float | None = None) -> DegeneracyReport:
    """Run `task`'s reference (with its size profile's overrides, then `overrides`) on
    `trials` (>= 3) seeded input sets on `device` and report degeneracy judged by
    `compare` with `atol`/`rtol` (None: the task's TOLERANCES, else per-dtype defaults).

    A reference that raises is reported degenerate with the error as the reason; running
    out of memory raises `DegeneracyCheckError`.
    """
    if int(trials) < MIN_TRIALS:
        raise ValueError(f"trials must be at least {MIN_TRIALS} (two standard input sets and one "
                         f"heavy-tailed), got {trials}")
    atol = task.atol if atol is None else atol
    rtol = task.rtol if rtol is None else rtol
    failure = memory = ""
    try:
        return _check(task, int(trials), dict(overrides or {}), seed, device, atol, rtol)
    except _ReferenceFailure as e:
        failure = str(e)
    except Exception as e:  # noqa: BLE001 - out of memory is no verdict; anything else is a bug
        if not _out_of_memory(e):
            raise
        memory = f"{type(e).__name__}: {e}"
    _release(device)  # the failed frames are gone: give their memory back
    if memory:
        raise DegeneracyCheckError(f"{task.task_id}: the degeneracy check ran out of memory on "
                                   f"{device}: {memory[:600]}")
    return DegeneracyReport(task.task_id, True, f"reference failed: {failure}", {"error": failure})


def _check(task: Task, trials: int, overrides: dict, seed: int, device: str,
           atol: float | None, rtol: float | None) -> DegeneracyReport:
    module = _reference(lambda: build_module(task, overrides))

    def build() -> torch.nn.Module:
        init = make_init_inputs(module, seed)
        with seeded(seed), build_device(device):
            return module.Model(*init).eval().to(device)

    model = _reference(build)
    specs = trial_plan(trials, seed)

    def inputs(spec: InputSpec) -> list:
        return _reference(lambda: make_trial_inputs(module, spec, device))

    def forward(xs: list) -> Any:
        def call() -> Any:
            with torch.no_grad(), torch.device(device):
                return _tree(model(*xs))
        return _reference(call)

    def passes(ref: Any, got: Any) -> tuple[bool, float]:
        """The judge's comparison's verdict and the error / tolerance figure (an answer
        more than CLEAR_MISS tolerances off fails that comparison: it is not asked)."""
        excess = tolerance_excess(ref, got, atol=atol, rtol=rtol)
        return excess <= CLEAR_MISS and compare(ref, got, atol=atol, rtol=rtol).ok, excess

    outs, tensor_inputs = [], []
    for k, spec in enumerate(specs):  # one input set at a time
        xs = inputs(spec)
        if k == 0:
            tensor_inputs = [i for i, x in enumerate(xs) if isinstance(x, torch.Tensor)]
        outs.append(forward(xs))
        del xs

    tensors = [x for x in _leaves(outs[0]) if isinstance(x, torch.Tensor)]
    numel = sum(t.numel() for t in tensors) + sum(1 for x in _leaves(outs[0]) if _is_number(x))
    inexact = next((t.dtype for t in tensors if _inexact(t)), None)
    tol = tolerance(inexact, atol, rtol) if inexact is not None else (atol, rtol)
    non_finite = [_non_finite(o) for o in outs]
    details: dict = {"trials": trials, "distributions": [s.distribution for s in specs],
                     "output_numel": int(numel), "tolerance": {"atol": tol[0], "rtol": tol[1]},
                     "non_finite": non_finite}
    reasons: list[str] = []
    if numel == 0:
        reasons.append("the output is empty")
    standard_bad = [k for k, n in enumerate(non_finite) if n and specs[k].distribution == "standard"]
    if standard_bad:
        k = standard_bad[0]
        reasons.append(f"the output has NaN or Inf on the task's own inputs ({non_finite[k]} of {numel} values "
                       f"in input set {k})")
    reasons += _input_independent_answers(outs, specs, passes, details)
    base_out = outs[0]
    del outs, tensors  # from here: one output, one input set and one input of another
    # (d) input i swapped for a standard and for a heavy-tailed draw: ignored only if
    # neither changes any output beyond the tolerance (the judge runs both kinds)
    donors = [next(k for k in range(1, trials) if specs[k].distribution == d) for d in ("standard", "heavy")
              if any(specs[k].distribution == d for k in range(1, trials))]
    swaps: dict[str, float | str] = {}
    differential: list[str] = []  # the reasons, per differential input
    differential_inputs: list[int] = []
    for i in tensor_inputs:
        changes = []
        for donor in donors:
            xs, other = inputs(specs[0]), inputs(specs[donor])
            draw = other[i] if i < len(other) and isinstance(other[i], torch.Tensor) else None
            del other
            if draw is None or (draw.shape == xs[i].shape and draw.dtype == xs[i].dtype
                                and bool(torch.equal(draw, xs[i]))):
                del xs, draw
                break  # the same in every standard set: a fixed input of the task, not tested
            xs[i] = draw
            del draw
            swapped = forward(xs)
            del xs
            changes.append(passes(base_out, swapped))
            del swapped
        if not changes:
            swaps[str(i)] = "same in every set"
            continue
        ex = max(e for _, e in changes)
        swaps[str(i)] = _figure(ex)
        if not all(ok for ok, _ in changes):
            continue
        if ex >= DIFFERENTIAL_FLOOR:
            differential_inputs.append(i)
            differential.append(f"input {i} moves the output only within the tolerance (largest change "
                                f"{ex:.3g}x the tolerance, at least the floor of {DIFFERENTIAL_FLOOR:g}x) when "
                                f"swapped for a standard or a heavy-tailed draw: the judge checks differentially "
                                f"that a candidate uses it")
        else:
            reasons.append(f"ignores input {i}: swapping it for a standard or a heavy-tailed draw changes the "
                           f"output by at most {ex:.3g}x the tolerance, under the floor of "
                           f"{DIFFERENTIAL_FLOOR:g}x a differential check needs")
    details.update(swaps=swaps, differential_inputs=differential_inputs, differential_floor=DIFFERENTIAL_FLOOR)
    return DegeneracyReport(task.task_id, bool(reasons), "; ".join(reasons), details,
                            differential_inputs=tuple(differential_inputs),
                            differential_reason="; ".join(differential))


def _input_independent_answers(outs: list, specs: tuple, passes: Callable, details: dict) -> list[str]:
    """Checks (a)-(c) on the sets' outputs: the reasons of those that pass; their figures
    go into `details` (answers, best_answer, best_excess, other_inputs_pair). One answer
    buffer exists at a time."""
    answers: dict[str, float] = {}
    best_pair, best, passing_pair = (0, 1), math.inf, None
    for j in range(len(outs)):  # (a) set j's output as the answer for every other set
        results = [(i, *passes(outs[i], outs[j])) for i in range(len(outs)) if i != j]
        worst_i, _, worst = max(results, key=lambda r: r[2])
        if worst < best:
            best_pair, best = (j, worst_i), worst
        if all(ok for _, ok, _ in results) and (passing_pair is None or worst < passing_pair[2]):
            passing_pair = (j, worst_i, worst)
    answers["other_inputs"] = best
    builders: dict[str, Callable[[], Any]] = {"mean_output": lambda: _mean_answer(outs)}  # (b)
    builders.update({name: (lambda pick=pick: _constant_answer(outs, pick)) for name, pick in CONSTANTS.items()})
    everywhere: dict[str, float] = {}  # (b) and (c) must pass against every set
    for name, make in builders.items():
        answer = make()
        results = [passes(o, answer) for o in outs]
        del answer
        answers[name] = max(ex for _, ex in results)
        if all(ok for ok, _ in results):
            everywhere[name] = answers[name]
    best_name = min(answers, key=lambda n: answers[n])
    details.update({"answers": {n: _figure(x) for n, x in answers.items()}, "best_answer": best_name,
                    "best_excess": _figure(answers[best_name]), "other_inputs_pair": list(best_pair)})

    reasons = []
    repeated = _one_repeated_value(outs)
    if repeated is not None:
        reasons.append(f"near-constant: every output is one value repeated ({repeated:.6g}) for every input set")
    if passing_pair:
        j, _, ex = passing_pair
        reasons.append(f"the output for other inputs passes: input set {j}'s output ({specs[j].distribution}) "
                       f"matches every other set's ({', '.join(s.distribution for s in specs)}) within the "
                       f"tolerance (largest error {ex:.3g}x the tolerance)")
    if repeated is None and "mean_output" in everywhere:
        reasons.append(f"near-constant: the mean output over {len(outs)} input sets passes against every set "
                       f"(largest error {everywhere['mean_output']:.3g}x the tolerance)")
    constants = [n for n in CONSTANTS if n in everywhere]
    if constants and repeated is None:
        n = min(constants, key=lambda c: everywhere[c])
        reasons.append(f"near-constant: a constant ({n.replace('_', ' ')}) passes against every set "
                       f"(largest error {everywhere[n]:.3g}x the tolerance)")
    return reasons


def _non_finite(out: Any) -> int:
    n = 0
    for x in _leaves(out):
        if isinstance(x, torch.Tensor) and _inexact(x):
            n += sum(int(c.numel() - torch.isfinite(c).sum()) for c in _chunks(x) if not _all_finite(c))
        elif _is_number(x) and not math.isfinite(float(x)):
            n += 1
    return n


def _all_finite(c: torch.Tensor) -> bool:
    """Every value of a floating-point chunk is finite (one reduction: NaN and Inf propagate)."""
    lo, hi = torch.aminmax(c.abs() if c.is_complex() else c)
    return math.isfinite(float(lo)) and math.isfinite(float(hi))


def _one_repeated_value(outs: list) -> float | None:
    """The single value every output element has in every set (one or more elements in
    all), or None."""
    value = None
    for o in outs:
        for x in _leaves(o):
            if _is_number(x):
                lo = hi = float(x)
            elif isinstance(x, torch.Tensor) and x.numel() and not x.is_complex():
                lo = hi = None
                for c in _chunks(x):
                    lo_c, hi_c = torch.aminmax(c.to(torch.float64) if c.dtype == torch.bool else c)
                    lo = float(lo_c) if lo is None else min(lo, float(lo_c))
                    hi = float(hi_c) if hi is None else max(hi, float(hi_c))
            else:
                return None
            if lo != hi or (value is not None and lo != value) or math.isnan(lo):
                return None
            value = lo
    return value
