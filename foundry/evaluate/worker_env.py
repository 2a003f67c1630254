"""The environment variables a device's sandbox workers run with (no torch here, so the
warm worker can start before the judge imports torch)."""

from __future__ import annotations


# glibc's malloc, settled: no per-thread cache of small chunks, and fixed thresholds (a buffer
# below 256 MiB comes from the heap, a freed one stays mapped). torch allocates with
# posix_memalign, which frees small pieces beside each buffer; the cache kept them, so a
# freed 4 MB output could not merge back and the next call's came from fresh pages: 1024 page
# faults, about 0.8 ms on a virtual machine, on some timings and not others, for eager and
# candidates alike (the same LayerNorm kernel was judged at 0.49 and 1.25 ms). Now an output
# allocated and freed on every call faults its pages in once.
CPU_MALLOC_POLICY = {"GLIBC_TUNABLES": ":".join((
    "glibc.malloc.tcache_count=0", f"glibc.malloc.mmap_threshold={256 << 20}",
    f"glibc.malloc.trim_threshold={256 << 20}"))}


def worker_env(device: str, *, threads: int, tf32: str = "off") -> dict[str, str]:
    """Settings for the warm worker and every child it forks, on top of a clean
    environment: thread counts, the device's own settings, and no bytecode written by
    candidates' processes."""
    n = str(threads)
    env = {"OMP_NUM_THREADS": n, "MKL_NUM_THREADS": n, "OPENBLAS_NUM_THREADS": n,
           "PYTHONDONTWRITEBYTECODE": "1"}
    if device == "cpu":
        # idle OpenMP threads sleep at once, so "work left running" is measurable
        env.update({"OMP_WAIT_POLICY": "PASSIVE", "TRITON_INTERPRET": "1"})
        env.update(CPU_MALLOC_POLICY)
    elif device == "cuda":
        env.update({
            # no CUBLAS_WORKSPACE_CONFIG: set, it made each cuBLAS call cost ~0.14 ms more host
            # time (a bf16 GEMM whose kernel takes 17 us was judged at 0.16 ms), a cost the
            # user's own process does not pay; poisoning needs no deterministic cuBLAS
            # never NVLink multicast (it can take a shared host's GPUs down)
            "NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1",
            # CUPTI finalized when a profiler session ends: left attached, it slows every later
            # launch of the process (a trial profiled before the timed runs would be judged slower)
            "TEARDOWN_CUPTI": "1",
            "FOUNDRY_TF32": tf32})
    else:
        raise ValueError(f"unknown device {device!r} (choose from cpu, cuda)")
    return env
