"""From a worker's raw report and the judge's reference outputs to guard flags and a stage.

Pure functions over already-collected data: no processes, no timing of its own."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from foundry.evaluate import output_tree, protocol
from foundry.evaluate.compare import Comparison, compare, equal_outputs
from foundry.evaluate.input_use import MAX_DEVIATION, change_check
from foundry.types import Stage

BUSY_FRACTION = 0.25  # of the idle window; more CPU than this means work left running
BUSY_MIN_MS = 5.0


@dataclass
class Findings:
    stage: Stage = Stage.CORRECT
    flags: list = field(default_factory=list)
    errors: list = field(default_factory=list)
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    candidate_outputs: dict = field(default_factory=dict)  # trial index -> decoded output
    # heavy-tailed trials passed against the float64 reference, not the float32 one (check_trials)
    float64_trials: list = field(default_factory=list)

    def flag(self, name: str, why: str) -> None:
        if name not in self.flags:
            self.flags.append(name)
            self.errors.append(f"[{name}] {why}")

    def lower(self, stage: Stage, why: str = "") -> None:
        if stage < self.stage:
            self.stage = stage
        if why:
            self.errors.append(why)

    def absorb(self, c: Comparison, where: str) -> None:
        self.max_abs_err = max(self.max_abs_err, c.max_abs_err)
        self.max_rel_err = max(self.max_rel_err, c.max_rel_err)
        if c.kind == "shape":
            self.lower(Stage.SHAPE, f"{where}: {c.message}")
        elif c.kind == "value":
            self.lower(Stage.VALUE, f"{where}: {c.message}")
            if c.non_finite:
                self.flag("non_finite", c.message)


def decode(msg: Any) -> Any:
    return output_tree.decode_tree(msg.header.get("tree"), msg.tensors)


LIBRARY_OPS = frozenset("""
mm addmm bmm baddbmm matmul linear convolution _convolution conv1d conv2d conv3d
conv_transpose1d conv_transpose2d conv_transpose3d mkldnn_convolution addmv mv dot
""".split())
CONVOLUTION_OPS = frozenset(op for op in LIBRARY_OPS if "conv" in op)
# scaled-dot-product attention as the backends' fused kernels: two batched products with a
# softmax between them, read as that work (a `bmm` and a `_softmax`)
ATTENTION_OPS = frozenset("""
scaled_dot_product_attention _scaled_dot_product_attention_math _scaled_dot_product_flash_attention
_scaled_dot_product_flash_attention_for_cpu _scaled_dot_product_efficient_attention
_scaled_dot_product_cudnn_attention _flash_attention_forward _efficient_attention_forward
""".split())


def reference_work(reference_ops: set) -> set:
    """A reference's compute ops, a fused attention op read as the products and the
    softmax it computes."""
    ops = set(reference_ops)
    if ops & ATTENTION_OPS:
        ops = (ops - ATTENTION_OPS) | {"bmm", "_softmax"}
    return ops


def library_work_only(reference_ops: set) -> bool:
    """Whether a reference's compute ops are library GEMMs/convolutions and nothing else:
    a kernel file may not leave such a task's work to the library."""
    ops = reference_work(reference_ops)
    return bool(ops & LIBRARY_OPS) and not (ops - LIBRARY_OPS)


def torch_compute_violation(candidate_ops: set, reference_ops: set) -> str:
    """Why the candidate's PyTorch ops are not allowed ("" if they are).

    A kernel file may leave GEMMs/convolutions to the library (KernelBench's level-2
    practice: a library GEMM with the rest fused into the candidate's kernel) when the
    reference uses them too and has other work, which the kernels must then do (an
    attention op counts as two products and a softmax: its products may be left to the
    library, its softmax not). Every other PyTorch compute op in forward is a PyTorch
    rewrite."""
    reference_ops = reference_work(reference_ops)
    other = sorted(set(candidate_ops) - LIBRARY_OPS)
    if other:
        return "forward computed with PyTorch ops (" + ", ".join(other)[:200] + ")"
    lib = set(candidate_ops) & LIBRARY_OPS
    if lib and not (reference_ops & LIBRARY_OPS):
        return "forward used library GEMM/convolution ops the task does not have (" + ", ".join(sorted(lib)) + ")"
    if lib and library_work_only(reference_ops):
        return ("the task is a library GEMM/convolution and forward left it to PyTorch ("
                + ", ".join(sorted(lib)) + ")")
    return ""


# A heavy-tailed trial's float32 reference can be off by more than the tolerance from what
# the model computes: its inputs span orders of magnitude, and how a sum or product is
# rounded and ordered then moves the answer (an attention's near-tied scores, a cumulative
# product that overflows in one order and not in another). Such a trial's output is also
# compared with the model computed in float64 (`precise`, asked for only when every other
# trial passed): a kernel that matches that is right, whichever rounding the reference met.
PRECISE_DISTRIBUTIONS = ("heavy",)


def check_trials(f: Findings, trials: dict, references: dict, trial_plan: tuple, *,
                 atol, rtol, launch_key: str | None, allow_torch_ops: bool,
                 reference_ops: set = frozenset(), precise: Callable[[int, float], Any] | None = None) -> None:
    """Compare every trial's output with the reference and apply the per-trial guards;
    `precise(i, scale)`: trial i's reference output computed in float64 (None where there
    is none), for the heavy-tailed trials whose output misses the float32 reference (see
    PRECISE_DISTRIBUTIONS)."""
    misses = []  # (trial, where, comparison): heavy-tailed trials judged once the others are
    for i, ref in references.items():
        msg = trials[i]
        try:
            got = decode(msg)
        except protocol.ProtocolError as e:
            f.flag("protocol_violation", str(e))
            f.lower(Stage.RUNTIME)
            return
        f.candidate_outputs[i] = got
        spec = trial_plan[i]
        where = f"trial {i} ({spec.distribution} inputs" + (f", shape variant {spec.variant})"
                                                             if spec.variant else ")")
        c = compare(ref, got, atol=atol, rtol=rtol)
        if c.kind == "value" and precise is not None and spec.distribution in PRECISE_DISTRIBUTIONS:
            misses.append((i, where, c))
        else:
            f.absorb(c, where)
        h = msg.header
        if h.get("inputs_changed"):
            f.flag("input_mutation", f"{where}: forward changed input(s) {h['inputs_changed']}")
        if launch_key and not allow_torch_ops and h.get("launches", 0) == 0:
            f.flag("kernel_not_launched", f"{where}: no {launch_key} kernel was launched during forward")
        prof = h.get("profiled")
        if isinstance(prof, dict) and not allow_torch_ops and prof.get("own_kernels", 1) == 0:
            f.flag("kernel_not_launched", f"{where}: the profiler saw none of the candidate's kernels "
                                          f"run ({str(prof.get('kernel_note', ''))[:200]})")
        if isinstance(h.get("torch_ops"), dict) and h["torch_ops"] and not allow_torch_ops:
            why = torch_compute_violation(set(map(str, h["torch_ops"])), set(reference_ops))
            if why:
                f.flag("torch_compute", f"{where}: {why}")
        if isinstance(h.get("threads_started"), int) and h["threads_started"] > 0:
            f.flag("threads", f"{where}: {h['threads_started']} thread(s) still running after forward")
    for i, where, c in misses:
        f.absorb(precise_verdict(f, i, c, f.candidate_outputs[i], precise, atol=atol, rtol=rtol,
                                 reference=references[i]), where)


def precise_verdict(f: Findings, i: int, missed: Comparison, got: Any, precise: Callable[[int, float], Any], *,
                    atol, rtol, scale: float = 1.0, reference: Any = None) -> Comparison:
    """The verdict on output `got` of trial `i` (its inputs times `scale`), which `missed`
    the float32 reference (`reference`, where given): its comparison with the float64
    reference where nothing judged so far failed and there is one (trial i then goes into
    `f.float64_trials`), else `missed`, with what the float64 reference said of `got` and,
    where `reference` is given, of the float32 reference itself (how far the task's own
    float32 rounding is from it on these inputs)."""
    if f.stage != Stage.CORRECT or f.flags:
        return missed  # a trial failed or a guard fired: no float64 reference is computed for a failed kernel
    exact = precise(i, scale)
    if exact is None:
        return missed
    c = compare(exact, got, atol=atol, rtol=rtol)
    if c.ok:
        if i not in f.float64_trials:
            f.float64_trials.append(i)
        return Comparison("ok", max_abs_err=c.max_abs_err, max_rel_err=c.max_rel_err)
    own = ""
    if reference is not None:
        r = compare(exact, reference, atol=atol, rtol=rtol)
        own = f"; the float32 reference's own max abs error against it {r.max_abs_err:.3g}"
    return Comparison(missed.kind, f"{missed.message} (against the model computed in float64: {c.message}{own})",
                      missed.max_abs_err, missed.max_rel_err, missed.non_finite)


def check_consistency(f: Findings, references: dict, repeat: Any, main_trials: list, *, atol, rtol) -> None:
    """Same input twice -> same answer; different inputs -> different answers where the
    reference's differ."""
    outs = f.candidate_outputs
    if repeat is not None and 0 in outs:
        c = compare(outs[0], repeat, atol=atol, rtol=rtol)
        if not c.ok:
            f.flag("nondeterministic", f"the same input gave a different answer the second time: {c.message}")
    for a in main_trials:
        for b in main_trials:
            if a < b and a in outs and b in outs and not equal_outputs(references[a], references[b]) \
                    and equal_outputs(outs[a], outs[b]):
                f.flag("constant_output", f"trials {a} and {b} have different inputs and reference "
                                          f"outputs but identical candidate outputs")
                return


def check_input_use(f: Findings, references: dict, trial_plan: tuple, pairs: list) -> None:
    """The differential check of the inputs a task depends on only within the tolerance
    (input_use.py): for each (paired trial, the trial it shares every other input with)
    in `pairs`, the candidate's change between the two must follow the reference's."""
    outs = f.candidate_outputs
    failed = []
    for p, b in pairs:
        if p not in outs or b not in outs:
            continue
        c = change_check(references[b], references[p], outs[b], outs[p])
        if c is None or c.ok:
            continue
        i = trial_plan[p].redraw
        failed.append(f"input {i} redrawn (trial {p} against trial {b}) moved the reference's output by "
                      f"{c.ref_change:.3g} and the candidate's by {c.cand_change:.3g} (RMS); the candidate's "
                      f"change misses the reference's by {c.error:.3g}, more than {MAX_DEVIATION:g}x the "
                      f"reference's change: the candidate does not use input {i} as the task does")
    if failed:
        f.flag("input_ignored", "; ".join(failed))


def check_probes(f: Findings, probes: list) -> None:
    for p in probes:
        if p.get("busy_ms", 0) > max(BUSY_MIN_MS, BUSY_FRACTION * p.get("window_ms", 0)):
            f.flag("background_work", f"the worker used {p['busy_ms']:.0f} ms of CPU in a "
                                      f"{p['window_ms']:.0f} ms window after forward returned")
        if p.get("descendants", 0) > 0:
            f.flag("subprocess", f"{p['descendants']} process(es) started by the candidate were running")
