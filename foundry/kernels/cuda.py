"""The `cuda` backend: CUDA C kernel source compiled at run time by NVRTC and launched
on torch tensors, on the current stream.

A candidate writes its kernels as CUDA C and launches them from `forward`::

    from foundry.kernels import cuda

    SRC = r'''
    extern "C" __global__ void relu(const float* x, float* y, long long n) {
        long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
        if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
    }
    '''
    mod = cuda.compile(SRC)                     # cached by content hash
    mod.relu(x, y, n, grid=((n + 255) // 256,), block=(256,))

Each `__global__` function's parameter list is read from the source, so arguments are
converted to the declared types (a tensor passes its data pointer, after checking that
it lives on the current CUDA device and is contiguous; an int passes as a raw pointer).
`shared_mem=` sets dynamic shared memory (raising the kernel's limit above 48 KB when
asked), `stream=` overrides torch's current stream.

Why cuda-python (`cuda.bindings`: NVRTC + the driver API) and not the alternatives:
it is NVIDIA's own, public and versioned binding of the two C APIs that every other
path wraps, so it follows new CUDA releases first, compiles on machines with no GPU
(only libnvrtc is needed, which is how CI tests the compile stage), and leaves launch
geometry, dynamic shared memory and streams fully in our hands.
`torch.cuda._compile_kernel` is private (no stability promise) and CuPy is a whole
array library whose NVRTC and memory pool sit beside torch's. CuPy's `RawModule` is
kept as a fallback launcher when cuda-python is missing (FOUNDRY_CUDA_LAUNCHER=cupy
forces it); with neither, `compile` raises CudaBackendUnavailable naming both packages.

Caching: a compiled image is keyed by a hash of source, options, target architecture
and NVRTC version; it is kept in this process and on disk (`cache_dir("cuda")`), so a
restarted worker loads it without recompiling.

The loaded side (signatures, the compiled image, `Module` and its kernels) is
`cuda_module.py`, which the launchers in `cuda_launch.py` build on; this module imports
them only when it picks one.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
import tempfile
import threading
from typing import Sequence

from foundry.kernels import cache_dir
from foundry.kernels.cuda_module import CompiledImage, CudaBackendUnavailable, KernelSignature, Module, Param

DEFAULT_OPTIONS = ("--std=c++17", "-default-device")
_SCALARS = {
    "int": ctypes.c_int, "signed": ctypes.c_int, "unsigned": ctypes.c_uint,
    "unsigned int": ctypes.c_uint, "long": ctypes.c_long, "long int": ctypes.c_long,
    "unsigned long": ctypes.c_ulong, "long long": ctypes.c_longlong,
    "long long int": ctypes.c_longlong, "unsigned long long": ctypes.c_ulonglong,
    "short": ctypes.c_short, "unsigned short": ctypes.c_ushort, "char": ctypes.c_char,
    "int8_t": ctypes.c_int8, "uint8_t": ctypes.c_uint8, "int16_t": ctypes.c_int16,
    "uint16_t": ctypes.c_uint16, "int32_t": ctypes.c_int32, "uint32_t": ctypes.c_uint32,
    "int64_t": ctypes.c_int64, "uint64_t": ctypes.c_uint64, "size_t": ctypes.c_size_t,
    "ptrdiff_t": ctypes.c_ssize_t, "float": ctypes.c_float, "double": ctypes.c_double,
    "bool": ctypes.c_bool,
}
_GLOBAL_RE = re.compile(
    r"(template\s*<[^>]*>\s*)?(?:extern\s+\"C\"\s+)?(?:static\s+)?__global__\s+"
    r"(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?"
    r"([A-Za-z_]\w*)\s*\(([^)]*)\)", re.S)
_lock = threading.Lock()
_modules: dict[str, "Module"] = {}


class CompileError(RuntimeError):
    """NVRTC rejected the source; `log` holds its output."""

    def __init__(self, message: str, log: str = ""):
        super().__init__(message + ("\n" + log if log else ""))
        self.log = log


def _strip_comments(src: str) -> str:
    src = re.sub(r"/\*.*?\*/", " ", src, flags=re.S)
    return re.sub(r"//[^\n]*", "", src)


def parse_kernels(source: str) -> tuple:
    """The non-template `__global__` functions of `source`, with parameter types."""
    found = []
    for m in _GLOBAL_RE.finditer(_strip_comments(source)):
        if m.group(1):  # templates need explicit instantiation; not launchable by name
            continue
        found.append(KernelSignature(m.group(2), tuple(_parse_params(m.group(3)))))
    return tuple(found)


def _parse_params(text: str) -> list[Param]:
    text = text.strip()
    if text in ("", "void"):
        return []
    params = []
    for raw in text.split(","):
        clean = re.sub(r"\b(const|__restrict__|__restrict|restrict|volatile|__grid_constant__)\b",
                       " ", raw)
        pointer = "*" in clean or "[" in clean
        clean = re.sub(r"\[[^\]]*\]", "", clean.replace("*", " ").replace("&", " "))
        words = clean.split()
        name = words[-1] if len(words) > 1 else ""
        tname = " ".join(words[:-1]) if len(words) > 1 else (words[0] if words else "")
        if pointer:
            params.append(Param(name, ctypes.c_void_p, True, raw.strip()))
        else:
            params.append(Param(name, _SCALARS.get(tname), False, raw.strip()))
    return params


def nvrtc_version() -> tuple:
    nvrtc = _nvrtc()
    err, major, minor = nvrtc.nvrtcVersion()
    _check_nvrtc(err, "nvrtcVersion")
    return (major, minor)


def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise CudaBackendUnavailable(
            "the cuda backend compiles with NVRTC through cuda-python: "
            "pip install cuda-bindings nvidia-cuda-nvrtc") from e
    return nvrtc


def _check_nvrtc(err, what: str) -> None:
    if int(err) != 0:
        raise CompileError(f"{what} failed: {err!r}")


def include_dirs() -> list[str]:
    """CUDA header directories for `#include <cuda_fp16.h>` and friends, where found."""
    dirs: list[str] = []
    try:
        from cuda.pathfinder import find_nvidia_header_directory
        for lib in ("cudart", "cccl"):
            try:
                d = find_nvidia_header_directory(lib)
            except Exception:  # noqa: BLE001 - optional lookup
                d = None
            if d and d not in dirs:
                dirs.append(d)
    except ImportError:
        pass
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    for d in (os.path.join(home, "include"), os.path.join(home, "include", "cccl")):
        if os.path.isdir(d) and d not in dirs:
            dirs.append(d)
    return dirs


def _pick_arch(capability: tuple, supported: Sequence[int]) -> str:
    cc = capability[0] * 10 + capability[1]
    if cc in supported:
        return f"sm_{cc}"
    older = [a for a in supported if a <= cc]
    if not older:
        raise CompileError(f"NVRTC supports {sorted(supported)}; none runs on sm_{cc}")
    return f"compute_{max(older)}"  # PTX the driver compiles for the newer device


def compile_image(source: str, *, capability: tuple, options: Sequence[str] = (),
                  name: str = "kernel.cu", use_disk_cache: bool = True) -> CompiledImage:
    """Compile `source` with NVRTC for a device of compute `capability` (e.g. (9, 0)).

    Needs only libnvrtc (no GPU). Raises CompileError with NVRTC's log on failure.
    """
    import time
    nvrtc = _nvrtc()
    err, supported = nvrtc.nvrtcGetSupportedArchs()
    _check_nvrtc(err, "nvrtcGetSupportedArchs")
    arch = _pick_arch(tuple(capability), list(supported))
    incs = tuple(f"-I{d}" for d in include_dirs())
    opts = (*DEFAULT_OPTIONS, f"--gpu-architecture={arch}", *options)
    signatures = parse_kernels(source)
    key = hashlib.sha256("\0".join([source, *opts, arch, repr(nvrtc_version())]).encode()
                         ).hexdigest()[:24]
    cached = _load_disk(key) if use_disk_cache else None
    if cached is not None:
        return cached
    t0 = time.perf_counter()
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], [])
    _check_nvrtc(err, "nvrtcCreateProgram")
    try:
        exprs = {s.name: f"&{s.name}" for s in signatures}
        for expr in exprs.values():
            _check_nvrtc(nvrtc.nvrtcAddNameExpression(prog, expr.encode())[0],
                         "nvrtcAddNameExpression")
        all_opts = [o.encode() for o in (*opts, *incs)]
        (cerr,) = nvrtc.nvrtcCompileProgram(prog, len(all_opts), all_opts)
        log = _program_log(nvrtc, prog)
        if int(cerr) != 0:
            raise CompileError(f"NVRTC could not compile {name} for {arch}", log[-6000:])
        if arch.startswith("sm_"):
            err, size = nvrtc.nvrtcGetCUBINSize(prog)
            _check_nvrtc(err, "nvrtcGetCUBINSize")
            buf = b" " * size
            _check_nvrtc(nvrtc.nvrtcGetCUBIN(prog, buf)[0], "nvrtcGetCUBIN")
        else:
            err, size = nvrtc.nvrtcGetPTXSize(prog)
            _check_nvrtc(err, "nvrtcGetPTXSize")
            buf = b" " * size
            _check_nvrtc(nvrtc.nvrtcGetPTX(prog, buf)[0], "nvrtcGetPTX")
        lowered = {}
        for kname, expr in exprs.items():
            err, low = nvrtc.nvrtcGetLoweredName(prog, expr.encode())
            _check_nvrtc(err, f"nvrtcGetLoweredName({kname})")
            lowered[kname] = low.decode() if isinstance(low, bytes) else str(low)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    image = CompiledImage(key=key, arch=arch, image=bytes(buf), lowered_names=lowered,
                          signatures=signatures, log=log,
                          compile_s=time.perf_counter() - t0)
    if use_disk_cache:
        _store_disk(image)
    return image


def _program_log(nvrtc, prog) -> str:
    err, size = nvrtc.nvrtcGetProgramLogSize(prog)
    if int(err) != 0 or size <= 1:
        return ""
    buf = b" " * size
    nvrtc.nvrtcGetProgramLog(prog, buf)
    return buf.rstrip(b"\x00").decode(errors="replace")


def _load_disk(key: str) -> CompiledImage | None:
    base = cache_dir("cuda")
    img, meta = base / f"{key}.bin", base / f"{key}.json"
    try:
        info = json.loads(meta.read_text())
        data = img.read_bytes()
    except (OSError, ValueError):
        return None
    if hashlib.sha256(data).hexdigest() != info.get("sha256"):
        return None
    return CompiledImage(key=key, arch=info["arch"], image=data,
                         lowered_names=dict(info["lowered_names"]),
                         signatures=(), log=info.get("log", ""), compile_s=0.0,
                         from_cache=True)


def _store_disk(image: CompiledImage) -> None:
    base = cache_dir("cuda")
    meta = {"arch": image.arch, "lowered_names": image.lowered_names, "log": image.log,
            "sha256": hashlib.sha256(image.image).hexdigest()}
    for suffix, data in ((".bin", image.image), (".json", json.dumps(meta).encode())):
        fd, tmp = tempfile.mkstemp(dir=base, prefix=f".{image.key}", suffix=suffix)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, base / f"{image.key}{suffix}")


def _launcher_name() -> str:
    forced = os.environ.get("FOUNDRY_CUDA_LAUNCHER", "").strip().lower()
    if forced in ("cupy", "cuda-python"):
        return forced
    if forced:
        raise CudaBackendUnavailable(
            f"FOUNDRY_CUDA_LAUNCHER={forced!r}: choose 'cuda-python' or 'cupy'")
    try:
        from cuda.bindings import driver  # noqa: F401
        return "cuda-python"
    except ImportError:
        pass
    try:
        import cupy  # noqa: F401
        return "cupy"
    except ImportError:
        raise CudaBackendUnavailable(
            "the cuda backend needs cuda-python (pip install cuda-bindings "
            "nvidia-cuda-nvrtc) or, as a fallback, CuPy; neither could be imported") from None


def compile(source: str, *, options: Sequence[str] = (), name: str = "kernel.cu") -> "Module":  # noqa: A001
    """Compile `source` for the current CUDA device (cached) and load it.

    Kernels are attributes of the result: ``mod.my_kernel(*args, grid=, block=)``.
    """
    import torch
    if not torch.cuda.is_available():
        raise CudaBackendUnavailable("the cuda backend needs a CUDA GPU; torch sees none")
    device = torch.cuda.current_device()
    capability = torch.cuda.get_device_capability(device)
    launcher = _launcher_name()
    key = hashlib.sha256("\0".join([source, *options, repr(capability), launcher,
                                    str(device)]).encode()).hexdigest()
    with _lock:
        if key in _modules:
            return _modules[key]
        signatures = parse_kernels(source)
        if not signatures:
            raise CompileError("no launchable __global__ function found in the CUDA source "
                               "(template kernels need a non-template wrapper)")
        if launcher == "cupy":
            from foundry.kernels.cuda_launch import CupyModule
            module: Module = CupyModule(source, options, signatures, device)
        else:
            image = compile_image(source, capability=capability, options=options, name=name)
            from foundry.kernels.cuda_launch import DriverModule
            module = DriverModule(image, signatures, device)
        _modules[key] = module
        return module
