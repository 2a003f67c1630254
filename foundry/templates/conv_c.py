"""The `c` backend's convolution kernel: a direct convolution in C for the CPU, 1-, 2- or
3-D (a 1-D or 2-D one is a 3-D one with size-1 leading spatial dims), standard (not
transposed), any stride, zero padding, dilation and group count, float32.

One OpenMP task computes one output row (sample, a block of OCB output channels of one
group, output depth and height) in tiles of OWT outputs along W, held in a stack buffer:
for each input channel of the group and each kernel tap, the taps' weights of the OCB
channels are read once, the input row once per tap, and a SIMD loop over the tile's
outputs adds weight x input into the OCB accumulators (so an input element is loaded
once for OCB multiply-adds). The kernel taps that reach outside the input (padding) are
cut from the loop bounds, not tested per element; the bias is the accumulators' start.

The library's convolution (oneDNN) is fast where there are many input channels; this one
is for where it is not: few input channels (LeNet-5's first layer, 1 channel: 126 ms for
oneDNN at batch 4096 on 2 cores), depthwise and grouped convolutions. The template engine
offers it as the `conv` template, the library's convolution staying under `fused`, and
the judge keeps whichever is faster.
"""

from __future__ import annotations

from foundry.templates.ir import Conv, FLOAT
from foundry.templates.tiles import block_for, default_first

TUNABLE_CONV_C = {"CONV_OCB": [8, 4, 16, 2, 1], "CONV_OWT": [64, 128, 32, 256]}

CONV_C_SRC = r"""
#define CONV_OCB @CONV_OCB@
#define CONV_OWT @CONV_OWT@
void foundry_conv(const float* restrict x, const float* restrict w, const float* restrict bias,
                  float* restrict out, const int64_t* restrict sz) {
    const int64_t N = sz[0], C = sz[1], D = sz[2], H = sz[3], W = sz[4];
    const int64_t CO = sz[5], OD = sz[6], OH = sz[7], OW = sz[8];
    const int64_t KD = sz[9], KH = sz[10], KW = sz[11];
    const int64_t SD = sz[12], SH = sz[13], SW = sz[14];
    const int64_t PD = sz[15], PH = sz[16], PW = sz[17];
    const int64_t DD = sz[18], DH = sz[19], DW = sz[20];
    const int64_t G = sz[21], HAS_BIAS = sz[22];
    const int64_t CG = C / G, COG = CO / G, KV = KD * KH * KW;
    const int64_t NB = (COG + CONV_OCB - 1) / CONV_OCB;
    const int64_t tasks = N * G * NB * OD * OH;
    #pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < tasks; t++) {
        int64_t r = t;
        const int64_t oh = r % OH; r /= OH;
        const int64_t od = r % OD; r /= OD;
        const int64_t ob = r % NB; r /= NB;
        const int64_t g = r % G;
        const int64_t n = r / G;
        const int64_t oc0 = g * COG + ob * CONV_OCB;
        const int64_t ocn = COG - ob * CONV_OCB < CONV_OCB ? COG - ob * CONV_OCB : CONV_OCB;
        float acc[CONV_OCB][CONV_OWT];
        for (int64_t t0 = 0; t0 < OW; t0 += CONV_OWT) {
            const int64_t tn = OW - t0 < CONV_OWT ? OW - t0 : CONV_OWT;
            for (int o = 0; o < CONV_OCB; o++) {
                const float b0 = (HAS_BIAS && o < ocn) ? bias[oc0 + o] : 0.f;
                for (int64_t j = 0; j < CONV_OWT; j++) acc[o][j] = b0;
            }
            for (int64_t ic = 0; ic < CG; ic++) {
                const float* xc = x + (n * C + g * CG + ic) * D * H * W;
                const float* wc = w + (oc0 * CG + ic) * KV;
                for (int64_t kd = 0; kd < KD; kd++) {
                    const int64_t id = od * SD - PD + kd * DD;
                    if (id < 0 || id >= D) continue;
                    for (int64_t kh = 0; kh < KH; kh++) {
                        const int64_t ih = oh * SH - PH + kh * DH;
                        if (ih < 0 || ih >= H) continue;
                        const float* xr = xc + (id * H + ih) * W;
                        for (int64_t kw = 0; kw < KW; kw++) {
                            /* input column ow * SW + off, inside [0, W) for ow in [lo, hi) */
                            const int64_t off = kw * DW - PW;
                            int64_t lo = off >= 0 ? 0 : (-off + SW - 1) / SW;
                            int64_t hi = W - 1 - off >= 0 ? (W - 1 - off) / SW + 1 : 0;
                            lo = lo - t0 > 0 ? lo - t0 : 0;
                            hi = hi - t0 < tn ? hi - t0 : tn;
                            if (lo >= hi) continue;
                            float wv[CONV_OCB];
                            const int64_t tap = (kd * KH + kh) * KW + kw;
                            for (int o = 0; o < CONV_OCB; o++) wv[o] = o < ocn ? wc[o * CG * KV + tap] : 0.f;
                            const float* xp = xr + t0 * SW + off;
                            if (SW == 1) {
                                #pragma omp simd
                                for (int64_t j = lo; j < hi; j++) {
                                    const float xv = xp[j];
                                    for (int o = 0; o < CONV_OCB; o++) acc[o][j] += wv[o] * xv;
                                }
                            } else {
                                #pragma omp simd
                                for (int64_t j = lo; j < hi; j++) {
                                    const float xv = xp[j * SW];
                                    for (int o = 0; o < CONV_OCB; o++) acc[o][j] += wv[o] * xv;
                                }
                            }
                        }
                    }
                }
            }
            for (int64_t o = 0; o < ocn; o++) {
                float* op = out + (((n * CO + oc0 + o) * OD + od) * OH + oh) * OW + t0;
                for (int64_t j = 0; j < tn; j++) op[j] = acc[o][j];
            }
        }
    }
}
"""

CONV_C_LAUNCHER = '''class _CCONV:
    """One convolution of fixed geometry (stride, padding, dilation per spatial dim, groups)
    run by the C direct convolution on the module's own weight and bias."""

    def __init__(self, lib, *, dims, stride, padding, dilation, groups):
        self.lib = lib
        self.dims = dims
        lead = 3 - dims
        self.stride = (1,) * lead + tuple(stride)
        self.padding = (0,) * lead + tuple(padding)
        self.dilation = (1,) * lead + tuple(dilation)
        self.groups = groups
        self.plans = {}

    def _plan(self, x_shape, w_shape, has_bias):
        lead = 3 - self.dims
        size = (1,) * lead + tuple(x_shape[2:])
        kernel = (1,) * lead + tuple(w_shape[2:])
        out_size = tuple((i + 2 * p - d * (k - 1) - 1) // s + 1 for i, s, p, d, k in
                         zip(size, self.stride, self.padding, self.dilation, kernel))
        out_shape = (x_shape[0], w_shape[0], *out_size[lead:])
        sizes = torch.tensor([x_shape[0], x_shape[1], *size, w_shape[0], *out_size, *kernel, *self.stride,
                              *self.padding, *self.dilation, self.groups, int(has_bias)], dtype=torch.int64)
        return out_shape, sizes

    def __call__(self, x, weight, bias):
        x = x.contiguous()
        weight = weight.contiguous()
        key = (tuple(x.shape), tuple(weight.shape), bias is not None)
        plan = self.plans.get(key)
        if plan is None:
            plan = self.plans[key] = self._plan(*key)
        out_shape, sizes = plan
        out = torch.empty(out_shape, dtype=x.dtype, device=x.device)
        if out.numel():
            self.lib.foundry_conv(x, weight, weight if bias is None else bias.contiguous(), out, sizes)
        return out
'''


def why_not_c_convs(convs: tuple) -> str | None:
    """Why the C convolution kernel does not take every one of `convs` (None when it does)."""
    for conv in convs:
        if conv.transposed:
            return "the c templates have no transposed-convolution kernel; the triton template takes it"
        if conv.dtype != FLOAT:
            return f"the c convolution kernel computes float32 only, this one is {conv.dtype}"
    return None


def conv_c_tunable(convs: tuple) -> dict:
    """TUNABLE_CONV_C with the default OCB no wider than the widest group's output channels
    (a depthwise convolution computes one channel per task first)."""
    tun = {k: list(v) for k, v in TUNABLE_CONV_C.items()}
    per_group = max(c.out_channels // c.groups for c in convs)
    tun["CONV_OCB"] = default_first(block_for(per_group, tun["CONV_OCB"]), tun["CONV_OCB"])
    widest = max(c.out_shape[-1] if c.out_shape else 1 for c in convs)
    tun["CONV_OWT"] = default_first(block_for(widest, tun["CONV_OWT"]), tun["CONV_OWT"])
    return tun


def conv_c_init_line(index: int, conv: Conv) -> str:
    """The constructor line of `self._conv<index>`; the group count is read from the module
    when the candidate is built (a depthwise convolution's changes with the sizes)."""
    return (f"self._conv{index} = _CCONV(lib, dims={conv.dims}, stride={conv.stride!r}, "
            f"padding={conv.padding!r}, dilation={conv.dilation!r}, groups={conv.module}.groups)")
