"""The judge's device memory around an evaluation (CUDA; nothing to do on a CPU).

An evaluation reserves its estimated device memory on the device gate for its whole
length (`reserved`; the wait for other lanes to give theirs back is the phase
"device_memory_wait"); when it has been judged, the judge's free cached blocks are
overwritten and given back to the driver (`release`), so neither an old result nor the
memory is left for the next worker. `judge_out_of_memory` tells the judge's own
out-of-memory, or a worker's (`WorkerOutOfMemory`), from anything else: the evaluation is
tried again once, with the lanes' device memory reserved whole.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator

from foundry.evaluate.device_gate import DeviceGate
from foundry.evaluate.phases import PhaseTimes

OOM_RETRY_WAIT_S = 300.0  # the longest a retry after the judge's out-of-memory waits for other lanes


@contextmanager
def reserved(gate: DeviceGate, nbytes: int, phases: PhaseTimes) -> Iterator[None]:
    """An evaluation's reservation of `nbytes` of device memory; a wait for other lanes'
    evaluations to give theirs back is the phase "device_memory_wait"."""
    started = time.monotonic()
    with gate.memory(nbytes):
        waited = time.monotonic() - started
        if waited > 1e-3:
            phases.add("device_memory_wait", waited)
        yield


def release(gate: DeviceGate) -> None:
    """cuda: the references and received outputs of this evaluation are garbage now;
    overwrite the judge's free cached blocks (0xFF) and give them back to the driver, so
    neither an old result nor the memory itself is left for the next worker. Device
    work: it runs when the caller holds the gate's shared section or that is free at
    once; else the blocks stay cached in this process, out of any worker's reach,
    until a later release."""
    try:
        import gc

        import torch

        from foundry.evaluate.cuda_device import poison_free_memory
        gc.collect()
        with gate.shared_if_free() as free:
            if free:
                poison_free_memory()
                torch.cuda.empty_cache()
    except Exception:  # noqa: BLE001 - housekeeping only
        pass


class WorkerOutOfMemory(RuntimeError):
    """A job's worker ran out of device memory: no verdict on the candidate yet (other
    lanes' work may have taken the memory); the evaluation is tried again with the lanes'
    device memory reserved whole."""


def out_of_memory(error: BaseException) -> bool:
    """Whether `error` is the device running out of memory: torch's OutOfMemoryError or
    the CUDA error text (not the host's MemoryError)."""
    import torch
    oom = getattr(torch, "OutOfMemoryError", None)
    return (oom is not None and isinstance(error, oom)) or "CUDA out of memory" in str(error)


def judge_out_of_memory(error: BaseException) -> bool:
    """Whether `error`, raised in the judge's own process, is the device running out of
    memory (`out_of_memory`), or a WorkerOutOfMemory."""
    return isinstance(error, WorkerOutOfMemory) or out_of_memory(error)
