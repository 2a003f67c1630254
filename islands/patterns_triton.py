"""Descriptor patterns for the `triton` backend (kernel code: @triton.jit functions)."""

from islands.patterns import Pattern, PatternTable

P = Pattern
PATTERNS = (
    # memory
    P("block_offsets", "memory", 1, r"tl\.arange\s*\(",
      needles=('tl.arange',)),
    P("contiguity_hints", "memory", 1, r"tl\.(?:max_contiguous|multiple_of)\s*\(",
      needles=('tl.max_contiguous', 'tl.multiple_of')),
    P("cache_hints", "memory", 1, r"(?:cache_modifier|eviction_policy)\s*=",
      needles=('cache_modifier', 'eviction_policy')),
    P("dot_tiles", "memory", 2, r"tl\.dot\s*\(",
      needles=('tl.dot',)),
    P("block_pointers", "memory", 2, r"tl\.(?:make_block_ptr|advance)\s*\(",
      needles=('tl.make_block_ptr', 'tl.advance')),
    P("tiles_2d", "memory", 2, r"\[\s*:\s*,\s*None\s*\]",
      needles=("None]",)),
    P("tile_transpose", "memory", 2, r"tl\.(?:trans|permute)\s*\(",
      needles=("tl.trans", "tl.permute")),
    P("software_pipelining", "memory", 3, r"num_stages\s*=\s*(?![01]\s*[,)\n])", scope="all",
      needles=("num_stages",)),
    P("tensor_descriptors", "memory", 3,
      r"tl\.make_tensor_descriptor\s*\(|_experimental_descriptor_load|\bTensorDescriptor\b",
      scope="all",
      needles=('make_tensor_descriptor', '_experimental_descriptor_load', 'TensorDescriptor')),
    # compute
    P("single_kernel", "compute", 1, requires=("@single_kernel",)),
    P("in_kernel_loop", "compute", 2,
      r"^\s*for\s+\w+\s+in\s+(?:tl\.)?(?:range|static_range)\s*\(",
      needles=('for ',)),
    P("tiled_dot_loop", "compute", 3, requires=("dot_tiles", "in_kernel_loop")),
    P("online_softmax", "compute", 3, r"tl\.maximum\s*\(\s*\w+\s*,\s*tl\.max\s*\(",
      needles=('tl.maximum',)),
    P("exp_rescale", "compute", 3, r"tl\.exp2?\s*\(\s*m_?\w*\s*-\s*m_?\w*\s*\)",
      needles=('tl.exp',)),
    # parallelism
    P("block_reduction", "parallelism", 1,
      r"tl\.(?:sum|max|min|reduce|cumsum|cumprod|associative_scan|argmax|argmin|xor_sum)\s*\(",
      needles=('tl.',)),
    P("debug_barrier", "parallelism", 1, r"tl\.debug_barrier\s*\(",
      needles=('tl.debug_barrier',)),
    P("warp_count", "parallelism", 2, r"num_warps\s*=", scope="all",
      needles=('num_warps',)),
    P("inline_asm", "parallelism", 2, r"tl\.inline_asm_elementwise\s*\(",
      needles=('tl.inline_asm_elementwise',)),
    P("grid_atomics", "parallelism", 3, r"tl\.atomic_\w+\s*\(",
      needles=('tl.atomic_',)),
    P("grouped_program_order", "parallelism", 3, r"GROUP_(?:SIZE_)?M\b|\bgroup_id\b",
      needles=('GROUP_', 'group_id')),
    P("persistent_programs", "parallelism", 3, r"tl\.num_programs\s*\(",
      needles=('tl.num_programs',)),
)

ADVICE = {
    "memory": (
        "one element per program with scalar loads",
        "block loads over tl.arange offsets with masks (coalesced), contiguity hints",
        "2D tiles (offsets [:, None] x [None, :]) fed to tl.dot or transposed, which Triton"
        " stages in shared memory",
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
