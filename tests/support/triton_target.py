"""Compile Triton kernels for a GPU this machine does not have: within
`builds_only(H200)` (foundry.evaluate.triton_prebuild), Triton's active driver is a
stand-in that names an sm_90 (Hopper, H200) target, reports the H200's shared memory,
and turns each launch into a no-op after the real compiler has built the kernel down to
a cubin (ptxas included). A template's launcher
then runs on CPU or meta tensors, every kernel it launches is compiled as it would be on
the GPU, and a kernel that the compiler rejects or that needs more shared memory than
the device has raises as it would there. Nothing is computed: outputs are garbage.

A process that switched Triton's interpreter on (TRITON_INTERPRET=1, as the CPU test
session does) cannot compile: run builds through `main` in a fresh process."""

from __future__ import annotations

from foundry.evaluate.triton_prebuild import H200, Built, builds_only, unsupported

UNSUPPORTED = 3  # main's exit status where this Triton cannot take the stand-in driver


def build_for_hopper(task, params: dict | None = None, variant: str = "fused") -> Built:
    """Run `task`'s Triton template candidate `variant` (with `params`) on meta tensors, every kernel
    compiled for sm_90; checks the output's shape and dtype against the reference's on
    meta tensors and returns the kernels built. Needs a process where Triton's
    interpreter was never switched on (see main)."""
    import torch

    from foundry.templates.engine import emit, reference_and_inputs
    from foundry.tuning.inprocess import load_candidate
    mod = load_candidate(emit(task, backend="triton", params=params, variant=variant), params or {})
    model, init, inputs = reference_and_inputs(task, device="meta")
    with torch.device("meta"):
        new = mod.ModelNew(*init)
    with torch.no_grad():
        expected = model(*inputs)
        with builds_only(H200) as built:
            out = new(*inputs)
    if (out.shape, out.dtype) != (expected.shape, expected.dtype):
        raise AssertionError(f"output {tuple(out.shape)} {out.dtype}, "
                             f"expected {tuple(expected.shape)} {expected.dtype}")
    return built


def main() -> int:
    """`python -m support.triton_target` (with tests/ on sys.path): a JSON list of builds
    on stdin, each {"path", "profile", "params", "variant"}; one JSON line per build on stdout:
    {"path", "params", "kernels": [[name, shared bytes], ...], "error": "" or the exception}.
    Exits UNSUPPORTED (the reason on stderr) where this Triton cannot take the stand-in."""
    import json
    import os
    import sys

    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        print("unset TRITON_INTERPRET: the interpreter replaces the compiler", file=sys.stderr)
        return 2
    why = unsupported()
    if why:
        print(why, file=sys.stderr)
        return UNSUPPORTED
    from foundry.tasks import load_task
    for build in json.load(sys.stdin):
        row = {"path": build["path"], "params": build.get("params"), "kernels": [], "error": ""}
        try:
            task = load_task(build["path"], profile=build.get("profile", "small"))
            row["kernels"] = build_for_hopper(task, build.get("params"), build.get("variant", "fused")).kernels
        except Exception as e:  # noqa: BLE001 - reported per build
            row["error"] = f"{type(e).__name__}: {str(e)[:400]}"
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
