"""A region of the deployed model as a torch custom op (`torch.library.custom_op`, with a
fake implementation, so torch.compile and torch.export trace through it).

The op takes the region's activations and then its parameters. Its dispatch is keyed by
the activations' shapes and dtypes and the device: a key the search judged a kernel on
runs that kernel; anything else runs the region's original code (the captured subgraph),
as does the fake implementation, on fake tensors, to give output shapes. Gradients
(where anything asks for them, as torch.compile does for parameters that require grad)
are the original code's: a vector-Jacobian product through the captured subgraph.

Each region has two ops (`RegionOps`): `with_grad`, the custom op above, and `inference`,
the same dispatch registered with `torch.library.Library` alone (its fake implementation,
no autograd layer), for calls that ask for no gradient: custom_op's Python autograd and
backend layers add about 50 us a call to the dispatch on a 2-core CPU and 10 on an H100
host's CUDA tensors, the bare registration about 20 and nothing measurable
(benchmarks/region_op_overhead.py).

The graph calls the ops through `region_call`: in plain eager inference (real tensors, not
under torch.compile or export, no gradient asked for) it runs the dispatch directly, since
even the bare op's dispatcher round trip costs microseconds a call inside a model, as much
as a fused kernel saves on a small region; under torch.compile or export, the `inference`
op where no gradient is asked for (torch.compile guards on that), else `with_grad`."""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field

import torch
import torch.fx as fx
import torch.nn as nn

from foundry.evaluate.compare import compare
from foundry.evaluate.cuda_timing import tf32_policy
from foundry.extract.taskcheck import as_outputs, structure_mismatch

NAMESPACE = "foundry_deploy"
_counter = itertools.count()
_lock = threading.Lock()


def dispatch_key(tensors) -> tuple:
    """(shapes and dtypes of `tensors`, device type): what a kernel was judged for."""
    return tuple((tuple(t.shape), str(t.dtype)) for t in tensors) + (tensors[0].device.type if tensors else "cpu",)


def _fresh(outs, args) -> list:
    """Outputs as new contiguous tensors (a custom op's outputs may not alias its inputs,
    nor each other)."""
    ptrs = {a.untyped_storage().data_ptr() for a in args if a.numel()}
    result = []
    for o in outs:
        if o.numel() and o.untyped_storage().data_ptr() in ptrs:
            o = o.clone()
        o = o.contiguous()
        ptrs.add(o.untyped_storage().data_ptr())
        result.append(o)
    return result


def _fresh_kernel_outputs(outs, args) -> list:
    """A kernel's outputs, which it allocates: only an output that is an input, or another
    output, or not contiguous, is copied (cheaper than `_fresh` on every call)."""
    seen = {id(a) for a in args}
    result = []
    for o in outs:
        if id(o) in seen or not o.is_contiguous():
            o = o.clone(memory_format=torch.contiguous_format)
        seen.add(id(o))
        result.append(o)
    return result


@dataclass
class RegionDispatch:
    """The kernels of one region occurrence by dispatch key, and its original code."""

    task_id: str
    fallback: fx.GraphModule  # (*activations, *params) -> tuple of outputs
    n_activations: int
    kernels: dict = field(default_factory=dict)  # dispatch key -> nn.Module (forward(*activations))
    kernel_calls: int = 0
    fallback_calls: int = 0

    def __call__(self, args: list) -> list:
        acts = args[:self.n_activations]
        kernel = self.kernels.get(dispatch_key(acts))
        if kernel is not None:
            self.kernel_calls += 1
            out = kernel(*[a.contiguous() for a in acts])
            return _fresh_kernel_outputs(out if isinstance(out, (tuple, list)) else (out,), args)
        self.fallback_calls += 1
        return _fresh(self.fallback(*args), args)


@dataclass(frozen=True)
class RegionOps:
    """The two ops of one region (see the module doc): `with_grad` (custom op, gradients
    through the original code) and `inference` (no autograd layer)."""

    with_grad: object  # torch._ops.OpOverload
    inference: object


_INFERENCE_LIBRARY = torch.library.Library(NAMESPACE, "FRAGMENT")  # kept alive: it holds the registrations


def register_region_op(dispatch: RegionDispatch) -> RegionOps:
    """The two new ops (`foundry_deploy::r<task>_<n>` and `foundry_deploy::i<task>_<n>`)
    running `dispatch`."""
    with _lock:
        name = f"{''.join(c if c.isalnum() else '_' for c in dispatch.task_id)}_{next(_counter)}"
        _INFERENCE_LIBRARY.define(f"i{name}(Tensor[] args) -> Tensor[]")
    return RegionOps(with_grad=_with_grad_op(name, dispatch), inference=_inference_op(name, dispatch))


def _fake(dispatch: RegionDispatch):
    def fake(args):
        return [torch.empty_like(o, memory_format=torch.contiguous_format) for o in dispatch.fallback(*args)]
    return fake


def _without_grad(dispatch: RegionDispatch):
    """What both ops run: `dispatch` on the arguments, no graph recorded."""
    def run(args):
        with torch.no_grad():
            return dispatch(list(args))
    return run


def _inference_op(name: str, dispatch: RegionDispatch):
    _INFERENCE_LIBRARY.impl(f"i{name}", _without_grad(dispatch), "CompositeExplicitAutograd")
    torch.library.register_fake(f"{NAMESPACE}::i{name}", _fake(dispatch), lib=_INFERENCE_LIBRARY)
    return getattr(getattr(torch.ops, NAMESPACE), f"i{name}").default


def _with_grad_op(name: str, dispatch: RegionDispatch):
    qualname = f"{NAMESPACE}::r{name}"

    run = _without_grad(dispatch)

    @torch.library.custom_op(qualname, mutates_args=())
    def region(args: list[torch.Tensor]) -> list[torch.Tensor]:
        return run(args)

    region.register_fake(_fake(dispatch))

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs[0])

    def backward(ctx, grads):
        args = ctx.saved_tensors
        _, pullback = torch.func.vjp(lambda *a: tuple(dispatch.fallback(*a)), *args)
        return list(pullback(tuple(grads))),

    region.register_autograd(backward, setup_context=setup_context)
    return getattr(getattr(torch.ops, NAMESPACE), f"r{name}").default


_PLAIN = (torch.Tensor, nn.Parameter)


def _grad_asked(args) -> bool:
    return torch.is_grad_enabled() and any(a.requires_grad for a in args)


def _plain_eager(args) -> bool:
    if torch.compiler.is_compiling():
        return False
    if any(type(a) not in _PLAIN for a in args):  # fake, functional or other tensor subclasses
        return False
    return not _grad_asked(args)


def region_call(ops: RegionOps, dispatch: RegionDispatch):
    """What the deployed graph calls for one region: `dispatch` directly in plain eager
    inference, else one of `ops` (see the module doc)."""
    def call(args):
        if _plain_eager(args):
            return dispatch(list(args))
        return ops.with_grad(args) if _grad_asked(args) else ops.inference(args)

    op = str(ops.with_grad)
    name = op.rsplit(".", 2)[-2] if "." in op else "region"
    call.__name__ = call.__qualname__ = f"foundry_{name}"
    call.foundry_op = ops.with_grad
    return call


def same_results(kernel: nn.Module, fallback: fx.GraphModule, args: tuple, n_activations: int,
                 *, atol: float | None = None, rtol: float | None = None) -> str | None:
    """None when `kernel` on the activations matches `fallback` on `args` by the judge's own
    comparison (foundry.evaluate.compare: `atol`/`rtol` as the task's TOLERANCES, None for
    the judge's per-dtype defaults, so a bfloat16 region gets bfloat16's), else how not.
    Both run with TF32 off, as in the judge: torch's default lets cuDNN convolutions use
    it, which puts a float32 reference off by TF32's error, beyond the judge's float32
    tolerance."""
    with torch.no_grad(), tf32_policy("off"):
        want = tuple(fallback(*args))
        got = kernel(*[a.contiguous() for a in args[:n_activations]])
    got = as_outputs(got)
    wrong = structure_mismatch(got, want)
    if wrong:
        return f"{wrong} (the region's)"
    for i, (g, w) in enumerate(zip(got, want)):
        verdict = compare(w, g, atol=atol, rtol=rtol, where=f"output {i}")
        if not verdict.ok:
            return f"differs from the region's: {verdict.message} (largest abs error {verdict.max_abs_err:.3g})"
    return None
