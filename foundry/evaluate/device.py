"""The device interface of the judge, and how a device implementation is found.

Everything device-specific sits behind two small modules per device:

``foundry.evaluate.<name>_device`` defines a class (``CpuDevice``, ``CudaDevice``) with

- ``name: str`` ("cpu", "cuda")
- ``prepare_worker(threads: int) -> None``: called in a worker before any candidate code
  (fix thread counts, create the context).
- ``hardware_id(threads: int) -> str``: e.g. ``"cpu:x86_64:2-threads"``, ``"NVIDIA H200"``.
- ``to_device(value)``: move one generated input (tensor or other) onto the device.
- ``synchronize() -> None``: wait until all queued work on the device is done.
- ``poison(enabled: bool) -> None``: while enabled, memory the candidate allocates
  without writing reads as NaN / max-int (CPU: torch's deterministic fill of
  uninitialised memory; CUDA: fill the caching allocator's free blocks too).
- ``static_patterns() -> dict[str, list[str]]``: extra regexes per guard flag that only
  make sense on this device (e.g. new CUDA streams); may be empty.
- ``time_forward(call, input_sets, *, clock, params, on_start) -> dict``: the timing protocol,
  implemented in ``foundry.evaluate.<name>_timing`` (see ``cpu_timing.time_forward`` for
  the contract: `on_start()` is called right before the timed blocks; per-block wall times of blocks of calls, the final output per input
  set, and the plan used).

``get_device("cuda")`` imports ``foundry.evaluate.cuda_device`` only when asked, and
says clearly when it is not there.

The variables every sandbox worker of a device runs with are in foundry.evaluate.worker_env.
"""

from __future__ import annotations

import importlib
from typing import Any

_CLASSES = {"cpu": ("foundry.evaluate.cpu_device", "CpuDevice"),
            "cuda": ("foundry.evaluate.cuda_device", "CudaDevice")}


class DeviceUnavailable(RuntimeError):
    """The requested device has no implementation here (or no hardware)."""


def get_device(name: str) -> Any:
    if name not in _CLASSES:
        raise DeviceUnavailable(f"unknown device {name!r} (choose from {', '.join(_CLASSES)})")
    module_name, cls_name = _CLASSES[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name and module_name.startswith(e.name):
            raise DeviceUnavailable(
                f"device {name!r} needs {module_name} (defining {cls_name}), which is not "
                f"installed in this checkout") from None
        raise
    return getattr(module, cls_name)()
