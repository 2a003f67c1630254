"""Descriptor patterns for the `triton` backend (kernel code: @triton.jit functions)."""

from islands.patterns import Pattern, PatternTable

P = Pattern
PATTERNS = (
    # memory
    P("block_offsets", "memory", 1, r"tl\.arange\s*\("),
    P("contiguity_hints", "memory", 1, r"tl\.(?:max_contiguous|multiple_of)\s*\("),
    P("cache_hints", "memory", 1, r"\b(?:cache_modifier|eviction_policy)\s*="),
    P("dot_tiles", "memory", 2, r"tl\.dot\s*\("),
    P("block_pointers", "memory", 2, r"tl\.(?:make_block_ptr|advance)\s*\("),
    P("software_pipelining", "memory", 3, r"\bnum_stages\s*=\s*(?:[2-9]|\d\d)", scope="all"),
    P("tensor_descriptors", "memory", 3,
      r"tl\.make_tensor_descriptor\s*\(|_experimental_descriptor_load|\bTensorDescriptor\b",
      scope="all"),
    # compute
    P("single_kernel", "compute", 1, requires=("@single_kernel",)),
    P("in_kernel_loop", "compute", 2,
      r"^\s*for\s+\w+\s+in\s+(?:tl\.)?(?:range|static_range)\s*\("),
    P("tiled_dot_loop", "compute", 3, requires=("dot_tiles", "in_kernel_loop")),
    P("online_softmax", "compute", 3, r"tl\.maximum\s*\(\s*\w+\s*,\s*tl\.max\s*\("),
    P("exp_rescale", "compute", 3, r"tl\.exp2?\s*\(\s*m_?\w*\s*-\s*m_?\w*\s*\)"),
    # parallelism
    P("block_reduction", "parallelism", 1,
      r"tl\.(?:sum|max|min|reduce|cumsum|cumprod|associative_scan|argmax|argmin|xor_sum)\s*\("),
    P("debug_barrier", "parallelism", 1, r"tl\.debug_barrier\s*\("),
    P("warp_count", "parallelism", 2, r"\bnum_warps\s*=", scope="all"),
    P("inline_asm", "parallelism", 2, r"tl\.inline_asm_elementwise\s*\("),
    P("grid_atomics", "parallelism", 3, r"tl\.atomic_\w+\s*\("),
    P("grouped_program_order", "parallelism", 3, r"\bGROUP_(?:SIZE_)?M\b|\bgroup_id\b"),
    P("persistent_programs", "parallelism", 3, r"tl\.num_programs\s*\("),
)

ADVICE = {
    "memory": (
        "one element per program with scalar loads",
        "block loads over tl.arange offsets with masks (coalesced), contiguity hints",
        "2D tiles via tl.make_block_ptr / tl.dot so Triton stages them in shared memory",
        "software pipelining (num_stages >= 2) or tensor descriptors (TMA) for async copies",
    ),
    "compute": (
        "several kernels or torch ops around the kernel (multi-pass)",
        "one kernel doing all the work, nothing left to torch in forward (fused)",
        "a loop inside the kernel streaming over the reduced dimension (single pass)",
        "tiled tl.dot loops or online-softmax (flash-style) accumulation",
    ),
    "parallelism": (
        "independent programs, no cooperation inside a program",
        "block-wide reductions/scans inside a program (tl.sum, tl.max, tl.reduce)",
        "explicit warp counts (num_warps) tuned per block size",
        "cooperation across programs: atomics, grouped tile ordering, persistent programs",
    ),
}

TABLE = PatternTable(backend="triton", patterns=PATTERNS, advice=ADVICE)
