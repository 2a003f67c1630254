"""The runtime layer of the `runtime_compile` guard, in a candidate's sandbox worker.

A candidate must launch its own kernels. One that hands its forward to a compiler at run
time (torch.compile, dynamo, Inductor's compile entry points and code loaders, Inductor's
autotuner) would be timed on the compiler's kernels. The static check
(`static_checks.PATTERNS["runtime_compile"]`) reads the source; this layer catches what
the source hides (`getattr(torch, "com" + "pile")`, a helper module doing it): once
`install` has run, every entry point listed in `ENTRY_POINTS` reports a violation and
ends the worker at once (`os._exit`, which the candidate cannot catch).

It is installed in candidate and screen jobs only, after the task's own module has been
built and before any candidate code loads; a baseline job runs torch.compile itself and
never installs it. Installing it imports nothing heavy: modules not yet imported (dynamo
and Inductor are not, after `import torch`) are patched by an import hook as they load.
Helpers that generated kernels import (`torch._inductor.runtime.triton_helpers`,
libdevice) are not entry points and stay usable.
"""

from __future__ import annotations

import os
import sys
from typing import Callable

# module -> names to guard: "fn" (a module function) or "Class.method"
ENTRY_POINTS: dict[str, tuple[str, ...]] = {
    "torch": ("compile",),
    "torch.compiler": ("compile",),
    # every dynamo-compiled frame runs under a callback installed through this one function
    "torch._C._dynamo.eval_frame": ("set_eval_frame",),
    "torch._dynamo": ("optimize", "optimize_assert", "export", "explain"),
    "torch._dynamo.eval_frame": ("optimize", "optimize_assert", "export", "set_eval_frame",
                                 "_maybe_set_eval_frame"),
    "torch._inductor": ("compile", "aot_compile", "standalone_compile", "aoti_compile_and_package"),
    "torch._inductor.compile_fx": ("compile_fx", "compile_fx_inner", "compile_fx_aot"),
    "torch._inductor.codecache": (
        "CppCodeCache.load", "CppCodeCache.load_async", "CppPythonBindingsCodeCache.load_pybinding",
        "CppPythonBindingsCodeCache.load_pybinding_async", "CppWrapperCodeCache.load_pybinding",
        "PyCodeCache.load", "PyCodeCache.load_by_key_path", "CUDACodeCache.load", "ROCmCodeCache.load",
        "HalideCodeCache.load", "XPUCodeCache.load"),
    "torch._inductor.async_compile": ("AsyncCompile.__init__",),
    "torch._inductor.runtime.triton_heuristics": (
        "CachingAutotuner.benchmark_all_configs", "CachingAutotuner.autotune_to_one_config",
        "CachingAutotuner.coordinate_descent_tuning"),
    "torch._inductor.select_algorithm": ("autotune_select_algorithm", "AlgorithmSelectorCache.__call__"),
}

# set_eval_frame(None) disables dynamo and set_eval_frame(False) only runs code compiled
# before; torch's own code does both (let through by `_guarded`). Any other callback
# compiles the frames it sees.
_EVAL_FRAME_SETTERS = frozenset({"set_eval_frame", "_maybe_set_eval_frame"})
EXIT_CODE = 3

_state: dict = {"installed": False, "report": None}


def violation_text(entry: str) -> str:
    return (f"runtime_compile: the candidate called {entry} at run time; a candidate must launch "
            "its own kernels, not compile its forward with torch.compile, dynamo or Inductor")


def _violation(entry: str) -> None:
    """Report, then end the process: a candidate cannot catch this and carry on."""
    text = violation_text(entry)
    try:
        if _state["report"] is not None:
            _state["report"](text)
        else:
            os.write(2, (text + "\n").encode())
    finally:
        os._exit(EXIT_CODE)


def _guarded(entry: str, original: Callable) -> Callable:
    name = entry.rsplit(".", 1)[-1]

    def guard(*args, **kwargs):
        if name in _EVAL_FRAME_SETTERS:
            callback = args[0] if args else kwargs.get("callback")
            if callback is None or callback is False:
                return original(*args, **kwargs)
        _violation(entry)

    guard.__name__ = getattr(original, "__name__", name)
    guard.__doc__ = f"Guarded by the judge: {entry} may not run in a candidate's process."
    return guard


def _patch(module_name: str, module) -> None:
    for target in ENTRY_POINTS.get(module_name, ()):
        owner, _, attr = target.rpartition(".")
        holder = getattr(module, owner, None) if owner else module
        if holder is None:
            continue  # this torch version has no such class
        original = holder.__dict__.get(attr) if isinstance(holder, type) else getattr(holder, attr, None)
        if original is None or getattr(original, "__foundry_guarded__", False):
            continue
        entry = f"{module_name}.{target}"
        if isinstance(original, (classmethod, staticmethod)):
            guard = staticmethod(_guarded(entry, original.__func__))
            guard.__func__.__foundry_guarded__ = True
        elif isinstance(holder, type) and attr != "__init__" and not callable(original):
            continue
        else:
            guard = _guarded(entry, original)
            guard.__foundry_guarded__ = True
        setattr(holder, attr, guard)


class _PatchingLoader:
    """Wraps a guarded module's loader: the module runs, then its entry points are patched."""

    def __init__(self, loader) -> None:
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        self.loader.exec_module(module)
        _patch(module.__name__, module)

    def __getattr__(self, name: str):
        return getattr(self.loader, name)


class _PatchOnImport:
    """A meta-path finder for the modules of ENTRY_POINTS that are not imported yet."""

    def find_spec(self, fullname: str, path=None, target=None):
        if fullname not in ENTRY_POINTS or fullname in sys.modules:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _PatchingLoader(spec.loader)
                return spec
        return None


def install(*, report: Callable[[str], None] | None = None) -> None:
    """Guard every entry point in this process from now on. `report(text)` is called with
    the violation's text before the process ends (the worker sends it to the judge)."""
    _state["report"] = report
    if _state["installed"]:
        return
    _state["installed"] = True
    for name in ENTRY_POINTS:
        module = sys.modules.get(name)
        if module is None and name == "torch._C._dynamo.eval_frame":
            torch = sys.modules.get("torch")
            module = getattr(getattr(getattr(torch, "_C", None), "_dynamo", None), "eval_frame", None)
        if module is not None:
            _patch(name, module)
    sys.meta_path.insert(0, _PatchOnImport())


def installed() -> bool:
    return bool(_state["installed"])

