"""The one list of what is not compute: allocation, views, copies, metadata and random
fills, by aten op name. The worker's recorder counts every other aten op a candidate's
forward runs as torch compute (`harness.OpRecorder`); the static checks let a candidate
call a `torch.<name>` function of this list (`static_checks.TORCH_ALLOWED`)."""

MOVEMENT_OPS = frozenset("""
empty empty_like empty_strided empty_permuted new_empty new_empty_strided zeros zeros_like
new_zeros ones ones_like new_ones full full_like new_full fill_ zero_ copy_ _to_copy clone
contiguous view _unsafe_view reshape _reshape_alias as_strided as_strided_ expand permute
transpose t squeeze unsqueeze flatten unflatten slice select narrow split split_with_sizes
chunk unbind cat stack detach detach_ alias lift_fresh lift_fresh_copy lift
_local_scalar_dense resize_ set_ arange scalar_tensor view_as expand_as movedim randn rand
randint normal_ uniform_ random_ is_same_size sym_size sym_stride sym_numel sym_storage_offset
constant_pad_nd _pin_memory is_pinned resolve_conj resolve_neg _has_compatible_shallow_copy_type
""".split())
