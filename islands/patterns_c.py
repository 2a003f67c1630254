"""Descriptor patterns for the `c` backend (CPU kernels in C, OpenMP and SIMD).

The GPU axes map to their CPU analogues: vector lanes for coalescing, cache tiling for
shared memory, prefetch and register accumulator tiles for async copy and register
blocking; threads with implicit barriers, SIMD-lane reductions and nested/collapsed
parallelism for the parallelism levels."""

from islands.patterns import Pattern, PatternTable

P = Pattern
PATTERNS = (
    # memory
    P("simd_pragma", "memory", 1, r"#\s*pragma\s+(?:omp\s+(?:parallel\s+for\s+)?simd|GCC\s+ivdep)",
      needles=('pragma',)),
    P("vector_intrinsics", "memory", 1, r"_mm(?:256|512)?_\w+\s*\(|\b__m(?:128|256|512)\w*",
      needles=('_mm', '__m')),
    P("vector_extensions", "memory", 1, r"vector_size\s*\(",
      needles=('vector_size',)),
    P("loop_tiling", "memory", 2,
      r"for\s*\([^;]*;[^;]*;\s*\w+\s*\+=\s*[A-Z_][A-Z0-9_]*\s*\)",
      needles=('+=',)),
    P("aligned_buffers", "memory", 2, r"aligned_alloc\s*\(|_mm_malloc\s*\(|\balignas\s*\(",
      needles=('aligned_alloc', '_mm_malloc', 'alignas')),
    P("prefetch", "memory", 3, r"__builtin_prefetch\s*\(|_mm_prefetch\s*\(",
      needles=('prefetch',)),
    P("register_accumulators", "memory", 3,
      r"^[ \t]*(?:float|double|__m256|__m512)\w*[ \t]+\w+[ \t]*\[[ \t]*\w+[ \t]*\][ \t]*\[",
      requires=("loop_tiling",),
      needles=('][',)),
    # compute
    P("single_kernel", "compute", 1, requires=("@single_kernel",)),
    P("accumulate_loop", "compute", 2,
      r"for\s*\([^;]*;[^;]*;(?:[^()]|\([^()]*\))*\)\s*\{?([^{}]{0,400})",
      within=r"[\w\]]\s*\+=|\b(\w+)\s*=\s*fmaxf?\s*\(\s*\1\b",
      flags=0,
      needles=('for',)),
    P("tiled_loops", "compute", 3, requires=("loop_tiling", "accumulate_loop")),
    P("online_softmax", "compute", 3,
      r"exp2?f?\s*\(\s*(?:m_\w+|\w*max\w*)\s*-\s*(?:m_\w+|\w*max\w*)\s*\)",
      needles=('exp',)),
    # parallelism
    P("omp_threads", "parallelism", 1, r"#\s*pragma\s+omp\s+parallel|pthread_create\s*\(",
      needles=('omp', 'pthread_create')),
    P("lane_reduction", "parallelism", 2, r"reduction\s*\(|#\s*pragma\s+omp\s+simd",
      needles=('reduction', 'simd')),
    P("nested_parallelism", "parallelism", 3,
      r"collapse\s*\(|#\s*pragma\s+omp\s+(?:task|taskloop|teams)\b|parallel\s+for\s+simd",
      needles=('collapse', 'omp', 'simd')),
)

ADVICE = {
    "memory": (
        "scalar loads in plain loops",
        "vectorised access: omp simd, SIMD intrinsics or vector extensions",
        "cache tiling: loops stepping by tile sizes, aligned tile buffers",
        "register accumulator tiles and software prefetch",
    ),
    "compute": (
        "several C functions or torch ops around them (multi-pass)",
        "one C function doing all the work (fused)",
        "one pass accumulating in registers over the reduced dimension",
        "tiled loop nests or online softmax (flash-style)",
    ),
    "parallelism": (
        "one thread",
        "OpenMP threads (parallel for, implicit barrier)",
        "SIMD-lane reductions (reduction clauses, omp simd)",
        "nested or collapsed parallelism (collapse, tasks, parallel for simd)",
    ),
}

TABLE = PatternTable(backend="c", patterns=PATTERNS, advice=ADVICE)
