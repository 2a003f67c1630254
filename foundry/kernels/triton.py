"""Triton glue for candidate files.

`install_launch_hook()` makes every launch of a `@triton.jit` kernel (compiled, or run by
Triton's interpreter when TRITON_INTERPRET=1) count in `foundry.kernels.launches()`
under the backend name "triton", so the judge can tell that the candidate's kernels
actually ran. The evaluator installs it in its workers; a candidate needs nothing.
`launch(kernel, grid, *args, **kwargs)` is an explicit equivalent of `kernel[grid](...)`.
"""

from __future__ import annotations

from typing import Any

from foundry.kernels import record_launch

_installed = False


def _kernel_name(fn: Any) -> str:
    inner = getattr(fn, "fn", None)
    return getattr(inner, "__name__", None) or getattr(fn, "__name__", "triton_kernel")


def _wrap(cls: type) -> None:
    original = cls.run
    if getattr(original, "_foundry_counted", False):
        return

    def run(self, *args, **kwargs):
        record_launch("triton", _kernel_name(self))
        return original(self, *args, **kwargs)

    run._foundry_counted = True  # type: ignore[attr-defined]
    cls.run = run


def install_launch_hook() -> None:
    """Count launches of every Triton kernel in this process (idempotent)."""
    global _installed
    if _installed:
        return
    from triton.runtime.jit import JITFunction
    _wrap(JITFunction)
    try:
        from triton.runtime.interpreter import InterpretedFunction
        _wrap(InterpretedFunction)
    except ImportError:  # pragma: no cover - older Triton without the interpreter
        pass
    _installed = True


def launch(kernel: Any, grid: Any, *args: Any, **kwargs: Any) -> Any:
    """`kernel[grid](*args, **kwargs)`, spelled as a function call."""
    return kernel[grid](*args, **kwargs)
