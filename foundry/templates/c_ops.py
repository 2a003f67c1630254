"""The `c` backend's op table: one C expression per pointwise op, the row ops'
accumulators, and vectorisable fp32 math helpers (exp, log, tanh, erf written as
polynomials on fp32 so `#pragma omp simd` loops vectorise without -ffast-math)."""

from __future__ import annotations

from foundry.templates.ir import Instr

C_MATH = r"""
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <float.h>
/* vmaxps, unlike fmaxf: b where either is NaN, so a bound goes first (kf_max(lo, x)) and a NaN x stays */
static inline float kf_max(float a, float b) { return a > b ? a : b; }
static inline float kf_min(float a, float b) { return a < b ? a : b; }
static inline float kf_exp(float x) {
    const float big = x > 88.72283f ? INFINITY : 1.f;  /* overflow gives inf, as expf */
    x = x < -87.3f ? -87.3f : (x > 88.7f ? 88.7f : x);
    float n = (x * 1.44269504088896341f + 12582912.f) - 12582912.f;  /* round to nearest */
    float r = x - n * 0.693145751953125f - n * 1.42860682030941723e-6f;
    float p = 1.f + r * (1.f + r * (0.5f + r * (0.166666672f + r * (0.0416666679f
              + r * (0.00833333377f + r * 0.00138888892f)))));
    int32_t bits = ((int32_t)n + 127) << 23;
    union { int32_t i; float f; } u; u.i = bits;
    return p * u.f * big;
}
static inline float kf_log(float x) {  /* x > 0, finite; branch-free (mantissa in [sqrt(.5), sqrt(2))) */
    union { float f; int32_t i; } ux; ux.f = x;
    int32_t ix = ux.i - 0x3f3504f3;
    int32_t e = ix >> 23;
    union { int32_t i; float f; } um; um.i = (ix & 0x007fffff) + 0x3f3504f3;
    float f = um.f - 1.f, t = f / (2.f + f), t2 = t * t;
    float s = 2.f * t * (1.f + t2 * (0.333333343f + t2 * (0.2f + t2 * (0.142857149f + t2 * 0.111111112f))));
    return (float)e * 0.693147182f + s;
}
static inline float kf_tanh(float x) {
    float ax = fabsf(x);
    float t = kf_exp(-2.f * ax);
    float big = (1.f - t) / (1.f + t);
    float x2 = x * x;
    float small = ax * (1.f + x2 * (-0.333333343f + x2 * (0.13333334f + x2 * -0.0539682540f)));
    float r = ax < 0.0625f ? small : big;
    return x < 0.f ? -r : r;
}
static inline float kf_sigmoid(float x) { return 1.f / (1.f + kf_exp(-x)); }
static inline float kf_erf(float x) {  /* A&S 7.1.28 (|err| < 3e-7): no exp, one division */
    float ax = fabsf(x);
    float p = 1.f + ax * (0.0705230784f + ax * (0.0422820123f + ax * (0.0092705272f + ax * (0.0001520143f
              + ax * (0.0002765672f + ax * 0.0000430638f)))));
    p = p * p; p = p * p; p = p * p; p = p * p;  /* ^16 */
    float y = 1.f - 1.f / p;
    float x2 = x * x;
    float small = ax * (1.12837917f + x2 * (-0.376126389f + x2 * (0.112837917f + x2 * -0.0268661706f)));
    float r = ax < 0.125f ? small : y;
    return x < 0.f ? -r : r;
}
static inline float kf_log1p_unit(float u) {  /* log(1 + u) for u in [0, 1]: 2 atanh(u / (2 + u)) */
    float t = u / (2.f + u), t2 = t * t;
    return 2.f * t * (1.f + t2 * (0.333333343f + t2 * (0.2f + t2 * (0.142857149f + t2 * (0.111111112f
           + t2 * (0.0909090936f + t2 * 0.0769230798f))))));
}
static inline float kf_softplus(float x, float beta, float threshold) {
    float z = x * beta;
    float az = z < 0.f ? -z : z;
    float sp = ((z > 0.f ? z : 0.f) + kf_log1p_unit(kf_exp(-az))) / beta;
    return z > threshold ? x : sp;
}
"""


def _f(v) -> str:
    """A C float literal."""
    v = float(v)
    if v == float("inf"):
        return "INFINITY"
    if v == float("-inf"):
        return "(-INFINITY)"
    return f"{v!r}f" if "e" in repr(v) or "." in repr(v) else f"{v!r}.f"


def c_pointwise(ins: Instr, a: list) -> str:
    """The C expression of one pointwise instruction on argument expressions `a`."""
    op, x = ins.op, a[0]
    if op == "relu":
        return f"({x} < 0.f ? 0.f : {x})"  # NaN stays NaN, as torch's
    if op == "sigmoid":
        return f"kf_sigmoid({x})"
    if op == "tanh":
        return f"kf_tanh({x})"
    if op == "gelu":
        if ins.attr("approximate") == "tanh":
            return f"(0.5f * {x} * (1.f + kf_tanh(0.797884560802865f * ({x} + 0.044715f * {x} * {x} * {x}))))"
        return f"(0.5f * {x} * (1.f + kf_erf({x} * 0.707106781186548f)))"
    if op == "silu":
        return f"({x} * kf_sigmoid({x}))"
    if op == "mish":
        return f"({x} * kf_tanh(kf_softplus({x}, 1.f, 20.f)))"
    if op == "hardswish":
        return f"({x} * kf_min(6.f, kf_max(0.f, {x} + 3.f)) / 6.f)"
    if op == "hardsigmoid":
        return f"(kf_min(6.f, kf_max(0.f, {x} + 3.f)) / 6.f)"
    if op == "hardtanh":
        return f"kf_min({_f(ins.attr('hi'))}, kf_max({_f(ins.attr('lo'))}, {x}))"
    if op == "elu":
        return f"({x} > 0.f ? {x} : {_f(ins.attr('alpha'))} * (kf_exp({x}) - 1.f))"
    if op == "selu":
        return f"(1.05070098735548f * ({x} > 0.f ? {x} : 1.67326324235437f * (kf_exp({x}) - 1.f)))"
    if op == "softplus":
        return f"kf_softplus({x}, {_f(ins.attr('beta'))}, {_f(ins.attr('threshold'))})"
    if op == "softsign":
        return f"({x} / (1.f + fabsf({x})))"
    if op == "leaky_relu":
        return f"({x} > 0.f ? {x} : {x} * {_f(ins.attr('slope'))})"
    if op == "clamp":
        lo, hi = ins.attr("lo"), ins.attr("hi")
        e = x
        if lo is not None:
            e = f"kf_max({_f(lo)}, {e})"
        if hi is not None:
            e = f"kf_min({_f(hi)}, {e})"
        return e
    unary = {"exp": "kf_exp({})", "log": "logf({})", "sqrt": "sqrtf({})", "rsqrt": "(1.f / sqrtf({}))",
             "abs": "fabsf({})", "neg": "(-{})", "reciprocal": "(1.f / {})", "identity": "({})"}
    if op in unary:
        return unary[op].format(x)
    y = a[1]
    if op == "masked_fill_eq":
        return f"({y} == {_f(ins.attr('c'))} ? {_f(ins.attr('v'))} : {x})"
    binary = {"add": "({} + {})", "sub": "({} - {})", "mul": "({} * {})", "div": "({} / {})",
              "maximum": "(({0}) != ({0}) ? ({0}) : (({0}) > ({1}) ? ({0}) : ({1})))",
              "minimum": "(({0}) != ({0}) ? ({0}) : (({0}) < ({1}) ? ({0}) : ({1})))"}
    if op in binary:
        return binary[op].format(x, y)
    if op == "pow":
        e = ins.args[1].value
        special = {2.0: f"({x} * {x})", 3.0: f"({x} * {x} * {x})", 0.5: f"sqrtf({x})",
                   1.0: f"({x})", -1.0: f"(1.f / {x})"}
        return special.get(e, f"powf({x}, {y})")
    raise ValueError(f"no C expression for pointwise op {op!r}")


# reductions: (init, combine(acc, v), finalize(acc, L) ; simd reduction operator or None)
C_REDUCE = {
    "sum": ("0.f", "{a} + {v}", "{a}", "+"),
    "mean": ("0.f", "{a} + {v}", "{a} / (float){L}", "+"),
    "max": ("-INFINITY", "kf_max({a}, {v})", "{a}", "max"),
    "min": ("INFINITY", "kf_min({a}, {v})", "{a}", "min"),
    "prod": ("1.f", "{a} * {v}", "{a}", "*"),
    "norm_l2": ("0.f", "{a} + {v} * {v}", "sqrtf({a})", "+"),
    "norm_l1": ("0.f", "{a} + fabsf({v})", "{a}", "+"),
}
C_DTYPE = {"float32": "float", "bool": "uint8_t", "int64": "int64_t", "int32": "int32_t"}
