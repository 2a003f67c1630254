"""Shared test setup: GPU tests skip without a GPU; one Ray instance per test session."""

from __future__ import annotations

import os

import pytest


def _has_cuda_driver() -> bool:
    return any(os.path.exists(p) for p in ("/dev/nvidiactl", "/proc/driver/nvidia/version"))


# Without a GPU, Triton can only run kernels in its interpreter. Set it before anything
# imports triton: triton.language's own @jit helpers (tl.cdiv, ...) are built at import
# time, and a process that imported triton without the interpreter cannot run them later.
if not _has_cuda_driver():
    os.environ.setdefault("TRITON_INTERPRET", "1")


def _has_cuda() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001 - no torch, no GPU
        return False


HAS_CUDA = _has_cuda()


def pytest_collection_modifyitems(config, items):
    if HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray instance for the whole test run (2 CPUs, 2 logical GPUs for pinning
    tests). Tests that need Ray take this fixture; it shuts Ray down at the end."""
    ray = pytest.importorskip("ray")
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    if not ray.is_initialized():
        ray.init(address="local", num_cpus=2, num_gpus=2, include_dashboard=False,
                 log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()
