"""The `c` backend: C kernels for the CPU, built into a shared library by the system
compiler and called through ctypes on tensor data pointers.

A candidate writes its kernels as plain C functions and calls them from `forward`::

    from foundry.kernels import c

    SRC = r'''
    #include <stdint.h>
    void relu(const float* x, float* y, int64_t n) {
        for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0.f ? x[i] : 0.f;
    }
    '''
    lib = c.build(SRC)                 # cached by content hash
    lib.relu(x, y, x.numel())          # tensors pass as data pointers

`build` reads each exported function's prototype from the source, so arguments are
converted to the declared C types (a tensor to its data pointer, after checking it is
contiguous and on the CPU). Builds are cached by a hash of source, flags and compiler;
a build is written to a temporary file and renamed, so concurrent builds are safe.

C++ sources (``language="c++"``, the system C++ compiler, ``-std=c++17``) export their
kernels as ``extern "C"`` functions; ``torch_headers=True`` adds the installed torch's
header and library directories (ATen's vector types, Inductor's ``cpp_prefix.h``; linked
against libtorch_cpu and libc10), and
the torch version and its header directory join the build's cache key.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

from foundry.kernels import cache_dir, record_launch

DEFAULT_FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-fopenmp", "-std=c11",
                 "-fno-fast-math")
LANGUAGES = {"c": ("-std=c11", ".c"), "c++": ("-std=c++17", ".cpp")}  # standard, file suffix
BUILD_TIMEOUT_S = 60.0

_CTYPES = {
    "float": ctypes.c_float, "double": ctypes.c_double,
    "int": ctypes.c_int, "unsigned": ctypes.c_uint, "unsigned int": ctypes.c_uint,
    "long": ctypes.c_long, "long long": ctypes.c_longlong,
    "unsigned long": ctypes.c_ulong, "size_t": ctypes.c_size_t,
    "int32_t": ctypes.c_int32, "int64_t": ctypes.c_int64,
    "uint32_t": ctypes.c_uint32, "uint64_t": ctypes.c_uint64, "ptrdiff_t": ctypes.c_ssize_t,
    "bool": ctypes.c_bool, "_Bool": ctypes.c_bool, "char": ctypes.c_char,
}
_FUNC_RE = re.compile(
    r"^[ \t]*(?:extern[ \t]+(\"C\"[ \t]+)?)?(?:inline[ \t]+)?(void|int|float|double|long|int64_t|int32_t)"
    r"[ \t]+([A-Za-z_]\w*)[ \t]*\(([^)]*)\)[ \t\n]*\{", re.M)
_lock = threading.Lock()
_loaded: dict[str, "Library"] = {}


class BuildError(RuntimeError):
    """The C compiler rejected the source; `log` holds its output."""

    def __init__(self, message: str, log: str = ""):
        super().__init__(message + ("\n" + log if log else ""))
        self.log = log


@dataclass(frozen=True)
class _Param:
    name: str
    ctype: Any  # a ctypes type; c_void_p for pointers
    pointer: bool


def _parse_params(text: str) -> list[_Param]:
    text = text.strip()
    if text in ("", "void"):
        return []
    params = []
    for raw in text.split(","):
        raw = re.sub(r"\b(const|restrict|__restrict__|__restrict|volatile|signed)\b", " ", raw)
        pointer = "*" in raw or "[" in raw
        raw = re.sub(r"\[[^\]]*\]", "", raw.replace("*", " "))
        words = raw.split()
        if not words:
            raise BuildError(f"cannot read parameter {text!r}")
        name = words[-1] if len(words) > 1 else ""
        tname = " ".join(words[:-1]) if len(words) > 1 else words[0]
        if pointer:
            params.append(_Param(name, ctypes.c_void_p, True))
        elif tname in _CTYPES:
            params.append(_Param(name, _CTYPES[tname], False))
        else:
            raise BuildError(f"unsupported C parameter type {tname!r} in ({text})")
    return params


def _restype(name: str):
    return None if name == "void" else _CTYPES[name]


def compiler(language: str = "c") -> str:
    """The system compiler for `language` ("c": $CC, gcc, cc, clang; "c++": $CXX, g++, c++, clang++)."""
    if language == "c++":
        cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
        if not cxx:
            raise BuildError("no C++ compiler found (install g++, or set CXX)")
        return cxx
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc") or shutil.which("clang")
    if not cc:
        raise BuildError("no C compiler found (install gcc, or set CC)")
    return cc


def torch_build_flags() -> tuple[tuple[str, ...], tuple[str, ...], str]:
    """(compile flags, link flags, cache-key text) for building against the installed
    torch's headers: its include directories, and libtorch_cpu and libc10 (header code
    calls into them: ATen's vector math into the SLEEF functions libtorch_cpu exports)."""
    import torch  # only builds that ask for torch's headers need torch

    root = Path(torch.__file__).resolve().parent
    include, lib = root / "include", root / "lib"
    if not (include / "ATen").is_dir():
        raise BuildError(f"the installed torch at {root} ships no C++ headers ({include}/ATen is missing)")
    compile_flags = (f"-I{include}", f"-I{include / 'torch' / 'csrc' / 'api' / 'include'}")
    link_flags = (f"-L{lib}", "-ltorch_cpu", "-lc10", f"-Wl,-rpath,{lib}")
    return compile_flags, link_flags, f"torch {torch.__version__} {include}"


@lru_cache(maxsize=None)
def _compiler_id(cc: str) -> str:
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    return out.splitlines()[0] if out else cc


@lru_cache(maxsize=None)
def native_target(cc: str) -> str:
    """What `-march=native` means on this machine (GCC's resolved target options, else the
    CPU's flags from /proc/cpuinfo): part of a build's cache key, so a cache shared by
    machines of different CPUs (a home directory on a cluster) never loads a library built
    for instructions this CPU lacks."""
    try:
        out = subprocess.run([cc, "-march=native", "-Q", "--help=target"], capture_output=True, text=True,
                             timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    options = [" ".join(line.split()) for line in out.splitlines()
               if line.strip().startswith(("-march=", "-mtune=")) or "[enabled]" in line]
    if options:
        return ";".join(options)
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""
    return next((line for line in cpuinfo.splitlines() if line.startswith(("flags", "Features"))), "")


class Kernel:
    """One exported C function; calling it converts arguments and counts the launch.

    `lib.kernel(x, y, n)` (two tensors and a size) took 3.1-3.5 us on a 2-core EPYC, against
    0.5 for the bare ctypes call and 4.0-4.2 before the conversions below were made
    cheaper and the kernels became the library's attributes (three alternating runs of
    each): paid on every launch, inside a deployed model's every forward. The function's
    argtypes (set from its prototype) convert plain numbers and pointers."""

    def __init__(self, fn, name: str, params: list[_Param]):
        self._fn, self.name, self.params = fn, name, params
        self._pointers = tuple(p.pointer for p in params)

    def __call__(self, *args):
        if len(args) != len(self._pointers):
            raise TypeError(f"{self.name}() takes {len(self.params)} arguments, got {len(args)}")
        conv = [_pointer(a, self, k) if pointer else _number(a, self, k)
                for k, (pointer, a) in enumerate(zip(self._pointers, args))]
        record_launch("c", self.name)
        return self._fn(*conv)


def _pointer(a, kernel: Kernel, k: int):
    if hasattr(a, "data_ptr"):
        if not a.is_cpu:
            raise ValueError(f"{kernel.name}: argument {kernel.params[k].name!r} is on {a.device}, the c backend "
                             "needs CPU tensors")
        if not a.is_contiguous():
            raise ValueError(f"{kernel.name}: argument {kernel.params[k].name!r} is not contiguous; call "
                             ".contiguous() first")
        return a.data_ptr()
    if a is None or isinstance(a, (int, ctypes.c_void_p)) and not isinstance(a, bool):
        return a  # NULL, an address, a pointer: the c_void_p argtype takes each as it is
    raise TypeError(f"{kernel.name}: argument {kernel.params[k].name!r} must be a tensor or a pointer, "
                    f"got {type(a).__name__}")


_FLOATS = (ctypes.c_float, ctypes.c_double)


def _number(a, kernel: Kernel, k: int):
    ctype = kernel.params[k].ctype
    if (type(a) is int and ctype is not ctypes.c_char) or (type(a) is float and ctype in _FLOATS):
        return a  # the argtype converts it
    return ctype(a.item() if hasattr(a, "item") else a)


class Library:
    """A built shared library; exported functions are attributes (`lib.relu(...)`)."""

    def __init__(self, path: Path, source: str, language: str = "c"):
        self.path = path
        self._dll = ctypes.CDLL(str(path))
        self.kernels: dict[str, Kernel] = {}
        for m in _FUNC_RE.finditer(_strip_comments(source)):
            extern_c, ret, name, params = m.group(1), m.group(2), m.group(3), m.group(4)
            if language == "c++" and not extern_c:
                continue  # a C++ name is mangled: only extern "C" functions are kernels
            if re.search(rf"\bstatic\b[^;{{}}]*\b{name}\s*\(", source):
                continue
            fn = getattr(self._dll, name)
            plist = _parse_params(params)
            fn.argtypes = [p.ctype for p in plist]
            fn.restype = _restype(ret)
            self.kernels[name] = Kernel(fn, name, plist)
            if not hasattr(self, name):  # found without __getattr__, whose miss costs about 2 us a call
                setattr(self, name, self.kernels[name])

    def __getattr__(self, name: str) -> Kernel:
        kernels = self.__dict__.get("kernels", {})
        if name in kernels:
            return kernels[name]
        raise AttributeError(f"the C library has no exported function {name!r} "
                             f"(found: {', '.join(sorted(kernels)) or 'none'})")


def _strip_comments(src: str) -> str:
    src = re.sub(r"/\*.*?\*/", " ", src, flags=re.S)
    return re.sub(r"//[^\n]*", "", src)


def build(source: str, *, flags: Sequence[str] = (), timeout_s: float = BUILD_TIMEOUT_S,
          language: str = "c", torch_headers: bool = False) -> Library:
    """Compile `source` into a shared library (cached) and load it.

    `flags` are added to DEFAULT_FLAGS (e.g. ``("-ffast-math",)`` where a task allows it).
    `language` is "c" or "c++"; `torch_headers` (C++ only) builds against torch's headers.
    Raises BuildError with the compiler's output when the source does not compile.
    """
    if language not in LANGUAGES:
        raise ValueError(f"unknown language {language!r} for the c backend (choose from {', '.join(LANGUAGES)})")
    if torch_headers and language != "c++":
        raise ValueError("torch_headers=True needs language='c++' (torch's headers are C++)")
    cc = compiler(language)
    std, suffix = LANGUAGES[language]
    all_flags = [std if f == "-std=c11" else f for f in DEFAULT_FLAGS] + list(flags)
    link_flags: list[str] = ["-lm"]
    key_parts = [source, *all_flags, _compiler_id(cc), native_target(cc)]
    if torch_headers:
        compile_flags, torch_link, torch_key = torch_build_flags()
        all_flags += compile_flags
        link_flags = [*torch_link, *link_flags]
        key_parts += [torch_key, *link_flags]
    key = hashlib.sha256("\0".join(key_parts).encode()).hexdigest()[:24]
    with _lock:
        if key in _loaded:
            return _loaded[key]
        out = cache_dir("c") / f"k_{key}.so"
        if not out.exists():
            _compile(cc, source, all_flags, link_flags, out, timeout_s, suffix=suffix)
        lib = Library(out, source, language)
        _loaded[key] = lib
        return lib


def _compile(cc: str, source: str, flags: list[str], link_flags: list[str], out: Path, timeout_s: float, *,
             suffix: str = ".c") -> None:
    with tempfile.TemporaryDirectory(prefix="foundry-c-", dir=out.parent) as tmp:
        name = "kernel" + suffix
        src = Path(tmp) / name
        src.write_text(source)
        tmp_out = Path(tmp) / out.name
        cmd = [cc, *flags, str(src), "-o", str(tmp_out), *link_flags]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise BuildError(f"C build timed out after {timeout_s:.0f} s") from None
        if proc.returncode != 0:
            log = (proc.stderr or proc.stdout).replace(str(src), name)
            raise BuildError("C build failed", log[-4000:])
        os.replace(tmp_out, out)
