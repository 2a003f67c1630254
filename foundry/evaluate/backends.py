"""The backend registry: what a candidate of each backend must contain, how its kernel
launches are counted, which device it runs on and what its warm worker imports ahead.

Adding a backend is one `register(BackendSpec(...))` call; `cuda` and `cuda_inline` are
registered here already (their device implementation is imported lazily).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class BackendSpec:
    """name: the Candidate.backend value.
    device: "cpu" or "cuda": where its kernels run (the judge refuses a mismatch).
    kernel_patterns: regexes that must ALL match the source (a kernel of this backend is
        defined and built/launched through the backend's helper).
    launch_key: the backend name kernels record via foundry.kernels.record_launch; None
        means launches are counted another way (the device's profiler).
    extra_patterns: backend-specific static checks, {flag: (regex, ...)}.
    preload: modules the warm worker imports before forking candidate workers.
    worker_setup: "module:function" called in the worker before the candidate's code
        runs (e.g. installing a launch hook); None for none.
    """

    name: str
    device: str
    kernel_patterns: tuple = ()
    launch_key: str | None = None
    extra_patterns: dict = field(default_factory=dict)
    preload: tuple = ()
    worker_setup: str | None = None
    description: str = ""


_REGISTRY: dict[str, BackendSpec] = {}


def register(spec: BackendSpec) -> BackendSpec:
    _REGISTRY[spec.name] = spec
    return spec


def get_backend(name: str) -> BackendSpec:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown backend {name!r} (known: {', '.join(sorted(_REGISTRY))})") from None


def backends() -> dict[str, BackendSpec]:
    return dict(_REGISTRY)


_C_FUNCTION = r"\b(void|int|float|double|int64_t|int32_t|long)\s+[A-Za-z_]\w*\s*\([^)]*\)\s*\{"

register(BackendSpec(
    name="c", device="cpu",
    kernel_patterns=(r"foundry\.kernels(\.c\b|\s+import\s+[^\n]*\bc\b)", r"\bbuild\s*\(", _C_FUNCTION),
    launch_key="c", preload=("foundry.kernels.c",),
    # clone( as a C call (the process-creating syscall), not a tensor's .clone() in Python
    extra_patterns={"threads": (r"\bpthread_create\b", r"\bstd::thread\b", r"(?<![.\w])clone\s*\("),
                    "precision_drop": (r"-ffast-math", r"-Ofast", r"\b_Float16\b", r"__bf16\b")},
    description="C kernels for the CPU via the system compiler and ctypes"))

register(BackendSpec(
    name="triton", device="cpu",
    kernel_patterns=(r"@\s*triton\.(jit|autotune)", r"\]\s*\("),
    launch_key="triton", preload=("triton", "triton.language", "foundry.kernels.triton"),
    worker_setup="foundry.kernels.triton:install_launch_hook",
    description="@triton.jit kernels (Triton's interpreter on CPU)"))

register(BackendSpec(
    name="cuda", device="cuda",
    kernel_patterns=(r"__global__", r"foundry\.kernels(\.cuda\b|\s+import\s+[^\n]*\bcuda\b)"),
    launch_key="cuda", preload=("foundry.kernels.cuda",),
    extra_patterns={"streams": (r"\bcudaStreamCreate", r"torch\.cuda\.Stream\s*\(", r"\bcudaDeviceReset")},
    description="CUDA C compiled by NVRTC through foundry.kernels.cuda"))

register(BackendSpec(
    name="cuda_inline", device="cuda",
    kernel_patterns=(r"__global__", r"\bload_inline\s*\("),
    launch_key=None, preload=("torch.utils.cpp_extension", "foundry.kernels.cuda_inline"),
    worker_setup="foundry.kernels.cuda_inline:install_build_hook",
    extra_patterns={"streams": (r"\bcudaStreamCreate", r"torch\.cuda\.Stream\s*\(", r"\bcudaDeviceReset")},
    description="torch.utils.cpp_extension.load_inline (KernelBench compatible)"))
