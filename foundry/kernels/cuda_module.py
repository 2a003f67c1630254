"""Loaded CUDA kernels, whatever launches them: the kernel signatures read from the source,
the image NVRTC produced, and `Module`, whose attributes are the kernels (calling one
converts its arguments to the declared types and launches it). The launchers
(`cuda_launch.py`) subclass `Module`; `cuda.py` compiles and picks one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from foundry.kernels import record_launch


class CudaBackendUnavailable(RuntimeError):
    """Neither cuda-python (`cuda.bindings`) nor CuPy could be loaded, or no GPU."""


@dataclass(frozen=True)
class Param:
    name: str
    ctype: Any  # ctypes type; c_void_p for pointers; None when unsupported
    pointer: bool
    type_text: str


@dataclass(frozen=True)
class KernelSignature:
    name: str
    params: tuple  # of Param


@dataclass(frozen=True)
class CompiledImage:
    """What NVRTC produced: a cubin (or PTX when the device is newer than NVRTC)."""

    key: str
    arch: str  # "sm_90" (cubin) or "compute_90" (PTX)
    image: bytes
    lowered_names: dict  # kernel name -> symbol name in the image
    signatures: tuple  # of KernelSignature
    log: str
    compile_s: float
    from_cache: bool = False

    @property
    def is_cubin(self) -> bool:
        return self.arch.startswith("sm_")


class Kernel:
    """One `__global__` function; calling it launches on the current stream."""

    def __init__(self, module: "Module", sig: KernelSignature):
        self.module, self.signature, self.name = module, sig, sig.name

    def __call__(self, *args, grid, block, shared_mem: int = 0, stream=None):
        params = self.signature.params
        if len(args) != len(params):
            raise TypeError(f"{self.name}() takes {len(params)} arguments, got {len(args)}")
        grid3, block3 = _dim3(grid, "grid", self.name), _dim3(block, "block", self.name)
        values = [self._convert(p, a) for p, a in zip(params, args)]
        record_launch("cuda", self.name)
        self.module.launch(self.name, grid3, block3, int(shared_mem), values,
                           [p.ctype for p in params], stream)

    def _convert(self, p: Param, a):
        if p.pointer:
            return _pointer(a, self.name, p.name, self.module.device)
        if p.ctype is None:
            raise TypeError(f"{self.name}: parameter {p.type_text!r} has a type the cuda "
                            f"backend cannot pass (use scalars, or pointers to structs)")
        if hasattr(a, "item"):
            a = a.item()
        return a


def _dim3(v, what: str, name: str) -> tuple:
    if isinstance(v, int):
        v = (v,)
    v = tuple(int(x) for x in v)
    if not 1 <= len(v) <= 3 or min(v) < 1:
        raise ValueError(f"{name}: {what} must be 1 to 3 positive ints, got {v}")
    return v + (1,) * (3 - len(v))


def _pointer(a, fname: str, pname: str, device: int) -> int:
    if a is None:
        return 0
    if isinstance(a, int):
        return a
    if hasattr(a, "data_ptr"):
        if a.device.type != "cuda" or a.device.index != device:
            raise ValueError(f"{fname}: argument {pname!r} is on {a.device}, "
                             f"the kernel runs on cuda:{device}")
        if not a.is_contiguous():
            raise ValueError(f"{fname}: argument {pname!r} is not contiguous; pass "
                             f"t.contiguous(), or t.data_ptr() for strided access")
        return a.data_ptr()
    raise TypeError(f"{fname}: argument {pname!r} must be a tensor or an int pointer, "
                    f"got {type(a).__name__}")


class Module:
    """Loaded kernels of one source; subclasses implement `launch` per launcher."""

    launcher = ""

    def __init__(self, signatures: tuple, device: int):
        self.device = device
        self.kernels = {s.name: Kernel(self, s) for s in signatures}

    def __getattr__(self, name: str) -> Kernel:
        kernels = self.__dict__.get("kernels", {})
        if name in kernels:
            return kernels[name]
        raise AttributeError(f"the CUDA module has no kernel {name!r} "
                             f"(found: {', '.join(sorted(kernels)) or 'none'})")

    def launch(self, name, grid, block, shared_mem, values, ctypes_, stream):  # pragma: no cover
        raise NotImplementedError
