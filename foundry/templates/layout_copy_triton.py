"""A Triton copy that changes which dim of a tensor is contiguous, shared by the templates
whose tensor-core products want an operand's sum dim contiguous (Hopper's product of
float32 tiles reads K-contiguous tiles; torch's copy of a transposed tall matrix ran at
under a tenth of the copy bandwidth on the H200): the matrix product's K_CONTIGUOUS
(gemm_triton.py) and the convolution's CHANNELS_LAST (conv_triton.py).

`KERNEL` is `_copy_tiles`'s source, `LAUNCHER` that of `_with_contiguous_dim(t, dim)` and
its helper `_batch_stride`; both go into a candidate file as they are."""

from __future__ import annotations

COPY_BLOCK = 64  # square tile of the copy

KERNEL = '''@triton.jit
def _copy_tiles(src, dst, R, C, TILES_C, s_sz, s_sr: tl.constexpr, s_sc: tl.constexpr, s_dz,
                s_dr: tl.constexpr, s_dc: tl.constexpr, BLOCK: tl.constexpr):
    # dst[z, r, c] = src[z, r, c] for [batch, R, C] views with their own strides; one
    # program per (batch, tile): the tile is read along src's contiguous dim and written
    # along dst's, the layout change going through shared memory
    pid = tl.program_id(0)
    tiles = tl.cdiv(R, BLOCK) * TILES_C
    z = (pid // tiles).to(tl.int64)
    t = pid % tiles
    r = (t // TILES_C) * BLOCK + tl.arange(0, BLOCK)
    c = (t % TILES_C) * BLOCK + tl.arange(0, BLOCK)
    inside = (r[:, None] < R) & (c[None, :] < C)
    r64 = r.to(tl.int64)[:, None]
    c64 = c.to(tl.int64)[None, :]
    x = tl.load(src + z * s_sz + r64 * s_sr + c64 * s_sc, mask=inside)
    tl.store(dst + z * s_dz + r64 * s_dr + c64 * s_dc, x, mask=inside)
'''

LAUNCHER = f'''def _batch_stride(t):
    return t.stride(0) if t.dim() == 3 and t.shape[0] > 1 else 0


def _with_contiguous_dim(t, dim):
    # a copy of t (2-D or 3-D) with the same shape whose dim `dim` (-1 or -2) is contiguous
    if dim == -1:
        out = torch.empty(t.shape, dtype=t.dtype, device=t.device)
    else:
        out = torch.empty(t.shape[:-2] + (t.shape[-1], t.shape[-2]), dtype=t.dtype, device=t.device)
        out = out.transpose(-2, -1)
    if t.numel() == 0:
        return out
    R, C = t.shape[-2], t.shape[-1]
    batch = t.shape[0] if t.dim() == 3 else 1
    tiles_c = triton.cdiv(C, {COPY_BLOCK})
    grid = (batch * triton.cdiv(R, {COPY_BLOCK}) * tiles_c,)
    _copy_tiles[grid](t, out, R, C, tiles_c, _batch_stride(t), t.stride(-2), t.stride(-1),
                      _batch_stride(out), out.stride(-2), out.stride(-1), BLOCK={COPY_BLOCK}, num_warps=4)
    return out
'''
