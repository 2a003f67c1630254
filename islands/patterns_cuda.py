"""Descriptor patterns for the `cuda` (NVRTC) and `cuda_inline` (load_inline) backends
(kernel code: the CUDA C source strings of the candidate)."""

from islands.patterns import Pattern, PatternTable

P = Pattern
PATTERNS = (
    # memory
    P("vector_types", "memory", 1,
      r"(?:float[24]|int[24]|uint[24]|double2|half2|__half2|__nv_bfloat162)\b",
      needles=("float2", "float4", "int2", "int4", "double2", "half2", "bfloat162")),
    P("read_only_loads", "memory", 1, r"__ldg\s*\(",
      needles=('__ldg',)),
    P("grid_stride", "memory", 1,
      r"blockDim\.x\s*\*\s*gridDim\.x|gridDim\.x\s*\*\s*blockDim\.x",
      needles=('gridDim.x',)),
    P("shared_memory", "memory", 2, r"__shared__",
      needles=('__shared__',)),
    P("async_copy", "memory", 3,
      r"cp\.async|__pipeline_memcpy_async|\bmemcpy_async\b|cuda::pipeline|\bcp_async",
      needles=("cp.async", "memcpy_async", "cuda::pipeline", "cp_async")),
    P("register_tile", "memory", 3,
      r"^[ \t]*(?:float|double|half|__half|int|float4)[ \t]+\w+[ \t]*\[[^\]\n]+\][ \t]*\[",
      needles=('][',)),
    P("tensor_core_fragments", "memory", 3, r"wmma::fragment|\bldmatrix\b",
      needles=('wmma::fragment', 'ldmatrix')),
    # compute
    P("single_kernel", "compute", 1, requires=("@single_kernel",)),
    P("accumulate_loop", "compute", 2,
      r"for\s*\([^;]*;[^;]*;(?:[^()]|\([^()]*\))*\)\s*\{?([^{}]{0,400})",
      within=r"[\w\]]\s*\+=|\b(\w+)\s*=\s*fmaxf?\s*\(\s*\1\b",
      flags=0,
      needles=('for',)),
    P("tensor_core_mma", "compute", 3, r"wmma::mma_sync|\bmma\.sync\b|\bmma_sync\b",
      needles=('mma_sync', 'mma.sync')),
    P("shared_tile_2d", "compute", 3, r"__shared__[^;\n]*\][ \t]*\[",
      requires=("accumulate_loop",),
      needles=('__shared__',)),
    P("online_softmax", "compute", 3,
      r"(?:__)?exp2?f?\s*\(\s*(?:m_\w+|\w*max\w*)\s*-\s*(?:m_\w+|\w*max\w*)\s*\)",
      needles=('exp',)),
    # parallelism
    P("block_barrier", "parallelism", 1, r"__syncthreads\s*\(|this_thread_block\s*\(",
      needles=('__syncthreads', 'this_thread_block')),
    P("warp_shuffle", "parallelism", 2, r"__shfl_(?:down_|up_|xor_)?sync\s*\(",
      needles=('__shfl_',)),
    P("warp_vote", "parallelism", 2, r"__(?:ballot|any|all)_sync\s*\(|__activemask\s*\(",
      needles=('_sync', '__activemask')),
    P("warp_reduce", "parallelism", 2, r"__reduce_\w+_sync\s*\(|tiled_partition",
      needles=('__reduce_', 'tiled_partition')),
    P("grid_sync", "parallelism", 3,
      r"this_grid\s*\(|\bgrid\.sync\s*\(|cudaLaunchCooperativeKernel",
      needles=('this_grid', 'grid.sync', 'cudaLaunchCooperativeKernel')),
    P("thread_block_clusters", "parallelism", 3,
      r"__cluster_dims__|this_cluster\s*\(|cluster\.sync\s*\(",
      needles=('__cluster_dims__', 'this_cluster', 'cluster.sync')),
    P("warp_block_grid_reduction", "parallelism", 3, r"atomic(?:Add|Max|Min|CAS|Exch)\s*\(",
      requires=("warp_shuffle|warp_reduce", "block_barrier"),
      needles=('atomic',)),
)

ADVICE = {
    "memory": (
        "one scalar global load/store per thread",
        "coalesced and vectorised access: float4/half2 loads, __ldg, grid-stride loops",
        "stage reused data in __shared__ tiles",
        "register tiles per thread plus async copies (cp.async / memcpy_async) or tensor-core"
        " fragments",
    ),
    "compute": (
        "several kernels or torch ops around the kernel (multi-pass)",
        "one kernel doing all the work, nothing left to torch in forward (fused)",
        "a loop accumulating in registers over the reduced dimension (single pass)",
        "tiled loops over 2D shared tiles, tensor-core MMA or online softmax (flash-style)",
    ),
    "parallelism": (
        "independent threads, no cooperation",
        "block-level cooperation with __syncthreads",
        "warp intrinsics: __shfl_*_sync, __reduce_*_sync, ballots",
        "hierarchical: warp + block + grid (atomics across blocks, grid sync, clusters)",
    ),
}

TABLE = PatternTable(backend="cuda", patterns=PATTERNS, advice=ADVICE)
INLINE_TABLE = PatternTable(backend="cuda_inline", patterns=PATTERNS, advice=ADVICE)
