"""Launchers for the `cuda` backend: the driver API through cuda-python (default) and
CuPy's RawModule (fallback). Both launch on torch's current stream of the kernel's device.
"""

from __future__ import annotations

import threading

from foundry.kernels.cuda_module import CompiledImage, CudaBackendUnavailable, Module

_tls = threading.local()


def _driver():
    from cuda.bindings import driver
    return driver


def _check(err, what: str) -> None:
    if int(err) != 0:
        driver = _driver()
        _, text = driver.cuGetErrorString(err)
        text = text.decode() if isinstance(text, bytes) else str(text)
        raise RuntimeError(f"CUDA driver: {what} failed: {err!r} ({text})")


def ensure_context(device: int) -> None:
    """Make the device's primary context (the one torch uses) current on this thread."""
    cached = getattr(_tls, "ctx", {})
    driver = _driver()
    if device in cached:
        err, cur = driver.cuCtxGetCurrent()
        if int(err) == 0 and int(cur) == int(cached[device]):
            return
    import torch
    torch.cuda.init()
    (err,) = driver.cuInit(0)
    _check(err, "cuInit")
    err, dev = driver.cuDeviceGet(device)
    _check(err, "cuDeviceGet")
    err, ctx = driver.cuDevicePrimaryCtxRetain(dev)
    _check(err, "cuDevicePrimaryCtxRetain")
    (err,) = driver.cuCtxSetCurrent(ctx)
    _check(err, "cuCtxSetCurrent")
    cached[device] = ctx
    _tls.ctx = cached


def _stream_handle(stream, device: int) -> int:
    if stream is None:
        import torch
        return int(torch.cuda.current_stream(device).cuda_stream)
    if hasattr(stream, "cuda_stream"):
        return int(stream.cuda_stream)
    return int(stream)


class DriverModule(Module):
    """A cubin/PTX image loaded with cuModuleLoadData; launches with cuLaunchKernel."""

    launcher = "cuda-python"

    def __init__(self, image: CompiledImage, signatures: tuple, device: int):
        super().__init__(signatures, device)
        self.image = image
        driver = _driver()
        ensure_context(device)
        err, self._module = driver.cuModuleLoadData(image.image)
        _check(err, f"cuModuleLoadData ({image.arch})")
        self._functions = {}
        self._smem_limit: dict[str, int] = {}
        for sig in signatures:
            symbol = image.lowered_names.get(sig.name, sig.name)
            err, fn = driver.cuModuleGetFunction(self._module, symbol.encode())
            _check(err, f"cuModuleGetFunction({sig.name})")
            self._functions[sig.name] = fn

    def launch(self, name, grid, block, shared_mem, values, ctypes_, stream):
        driver = _driver()
        ensure_context(self.device)
        fn = self._functions[name]
        if shared_mem > 48 * 1024 and self._smem_limit.get(name, 0) < shared_mem:
            attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            (err,) = driver.cuFuncSetAttribute(fn, attr, shared_mem)
            _check(err, f"raising {name}'s dynamic shared memory to {shared_mem} bytes")
            self._smem_limit[name] = shared_mem
        handle = driver.CUstream(_stream_handle(stream, self.device))
        (err,) = driver.cuLaunchKernel(fn, *grid, *block, shared_mem, handle,
                                       (tuple(values), tuple(ctypes_)), 0)
        _check(err, f"launching {name} grid={grid} block={block} shared_mem={shared_mem}")


class CupyModule(Module):
    """Fallback launcher: CuPy compiles with its own NVRTC and launches the function."""

    launcher = "cupy"

    def __init__(self, source: str, options, signatures: tuple, device: int):
        super().__init__(signatures, device)
        try:
            import cupy
        except ImportError as e:  # pragma: no cover - environment
            raise CudaBackendUnavailable("FOUNDRY_CUDA_LAUNCHER=cupy but CuPy is not installed") from e
        import numpy as np
        self._np, self._cupy = np, cupy
        opts = ("--std=c++17", *options)
        with cupy.cuda.Device(device):
            self._mod = cupy.RawModule(code=source, options=opts,
                                       name_expressions=[s.name for s in signatures])
            self._functions = {s.name: self._mod.get_function(s.name) for s in signatures}

    def launch(self, name, grid, block, shared_mem, values, ctypes_, stream):
        np, cupy = self._np, self._cupy
        args = []
        for v, ct in zip(values, ctypes_):
            import ctypes
            if ct is ctypes.c_void_p:
                args.append(np.uint64(v))
            else:
                args.append(np.dtype(ct).type(v))
        fn = self._functions[name]
        if shared_mem > 48 * 1024:
            fn.max_dynamic_shared_size_bytes = shared_mem
        with cupy.cuda.Device(self.device):
            ext = cupy.cuda.ExternalStream(_stream_handle(stream, self.device))
            fn(grid, block, tuple(args), shared_mem=shared_mem, stream=ext)
