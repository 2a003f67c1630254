"""The CPU part of a seed: Inductor's C++ kernels as one `c`-backend C++ library.

Each kernel Inductor wrote (`extern "C" void kernel(...)` in its own source, built by
`async_compile.cpp_pybinding`) keeps its body and takes its wrapper name; all go into one
translation unit that includes Inductor's `cpp_prefix.h` once and is built by
`foundry.kernels.c.build(..., language="c++", torch_headers=True)` with the flags Inductor
builds its kernels with (`inductor_cpp_flags`: its vector ISA's macro and -m flags, its
definitions and its floating-point options). A launch passes each tensor as its data
pointer (Inductor's kernels index with their own strides), scalars as they are.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from foundry.seeds.candidate import BackendPart
from foundry.seeds.output_code import InductorKernel
from foundry.seeds.result import SeedError

PREFIX_INCLUDE = "#include <torch/csrc/inductor/cpp_prefix.h>"
HEADER = '''import torch
import torch.nn as nn
import torch.nn.functional as F
from foundry.kernels import c'''
# Inductor's own flags that the c backend sets already, or that only add warnings/debug info
_DROPPED = frozenset({"O3", "march=native", "shared", "fPIC", "fopenmp", "Wall", "pedantic", "g1", "g",
                      "fno-omit-frame-pointer"})
_KERNEL_DEF = re.compile(r'extern\s+"C"\s+void\s+kernel\s*\(')


class CppSeedError(SeedError):
    """Inductor's C++ output cannot be held as a c-backend library; the message says why."""


@dataclass(frozen=True)
class CppFlags:
    flags: tuple  # compiler flags beyond the c backend's defaults
    isa: str  # the vector ISA Inductor generated for ("avx512", "avx2", ... or "none")


def inductor_cpp_flags() -> CppFlags:
    """The flags Inductor builds its CPU kernels with on this machine."""
    from torch._inductor import cpp_builder, cpu_vec_isa

    isa = cpu_vec_isa.pick_vec_isa()
    opts = cpp_builder.CppTorchOptions(vec_isa=isa, include_pytorch=True, shared=True)
    flags = [f"-{f}" for f in opts.get_cflags() if f not in _DROPPED and not f.startswith("Wno")]
    flags += [f"-D{d.strip()}" for d in opts.get_definitions() if d.strip()]
    for arg in opts.get_passthrough_args():
        flags += arg.split()
    name = str(isa).strip() or "none"
    return CppFlags(flags=tuple(dict.fromkeys(flags)), isa=name)


def kernel_function(kernel: InductorKernel, name: str) -> tuple[str, list[str]]:
    """(the kernel's source with its function named `name`, the #include lines it had)."""
    includes, body = [], []
    for line in kernel.source.strip("\n").splitlines():
        (includes if line.strip().startswith("#include") else body).append(line)
    text, n = _KERNEL_DEF.subn(f'extern "C" void {name}(', "\n".join(body))
    if n != 1:
        raise CppSeedError(f"kernel {kernel.name!r} defines {n} extern \"C\" void kernel(...) functions, expected 1")
    return text, [i.strip() for i in includes]


def cpp_library_source(kernels: list[tuple[InductorKernel, str]]) -> str:
    """One C++ source holding every (kernel, new name)."""
    includes: list[str] = [PREFIX_INCLUDE]
    parts = []
    for kernel, name in kernels:
        text, inc = kernel_function(kernel, name)
        includes += [i for i in inc if i not in includes]
        parts.append(f"// {kernel.name}\n{text}")
    return "\n".join(includes) + "\n\n" + "\n\n".join(parts) + "\n"


def cpp_launch(names: dict):
    """A wrapper.Launch for cpp kernels; `names` maps a kernel's wrapper name to its
    name in the library (and the candidate's attribute `self._<name>`)."""

    def launch(call: ast.Call, kernel: InductorKernel) -> str:
        if call.keywords:
            raise CppSeedError(f"kernel {kernel.name!r} is called with keywords")
        if len(call.args) != len(kernel.arg_types):
            raise CppSeedError(f"kernel {kernel.name!r} takes {len(kernel.arg_types)} arguments, "
                               f"the wrapper passes {len(call.args)}")
        args = []
        for a, ctype in zip(call.args, kernel.arg_types):
            text = ast.unparse(a)
            args.append(f"{text}.data_ptr()" if "*" in ctype else text)
        return f"self._{names[kernel.name]}({', '.join(args)})"

    return launch


def cpp_part(library_source: str, kernel_names: list[str], flags: CppFlags) -> BackendPart:
    kernels = (f"_CPP_SRC = r'''\n{library_source}'''\n\n"
               f"# the flags Inductor builds these kernels with (vector ISA: {flags.isa})\n"
               f"_CPP_FLAGS = {flags.flags!r}")
    init = ["lib = c.build(_CPP_SRC, language='c++', torch_headers=True, flags=_CPP_FLAGS)"]
    init += [f"self._{n} = lib.{n}" for n in kernel_names]
    return BackendPart(header=HEADER, kernels=kernels, init_lines=tuple(init))
