"""The `triton` backend's op table: one Triton expression per pointwise op."""

from __future__ import annotations

from foundry.templates.ir import Instr


def _f(v) -> str:
    v = float(v)
    if v in (float("inf"), float("-inf")):
        return "float('inf')" if v > 0 else "float('-inf')"
    return repr(v)


def _max(a: str, b: str) -> str:  # NaN from either side stays NaN, as torch's
    return f"tl.maximum({a}, {b}, propagate_nan=tl.PropagateNan.ALL)"


def _min(a: str, b: str) -> str:
    return f"tl.minimum({a}, {b}, propagate_nan=tl.PropagateNan.ALL)"


def _tanh(x: str) -> str:
    return f"(2.0 * tl.sigmoid(2.0 * {x}) - 1.0)"


def _softplus(x: str, beta: float, thr: float) -> str:
    z = f"({x} * {_f(beta)})"
    return f"tl.where({z} > {_f(thr)}, {x}, tl.log(1.0 + tl.exp(tl.minimum({z}, {_f(thr)}))) / {_f(beta)})"


def triton_pointwise(ins: Instr, a: list) -> str:
    """The Triton expression of one pointwise instruction on argument expressions `a`."""
    op, x = ins.op, a[0]
    if op == "relu":
        return _max(x, "0.0")
    if op == "sigmoid":
        return f"tl.sigmoid({x})"
    if op == "tanh":
        return _tanh(x)
    if op == "gelu":
        if ins.attr("approximate") == "tanh":
            inner = f"0.7978845608028654 * ({x} + 0.044715 * {x} * {x} * {x})"
            return f"(0.5 * {x} * (1.0 + {_tanh(inner)}))"
        return f"(0.5 * {x} * (1.0 + tl.erf({x} * 0.7071067811865476)))"
    if op == "silu":
        return f"({x} * tl.sigmoid({x}))"
    if op == "mish":
        return f"({x} * {_tanh(_softplus(x, 1.0, 20.0))})"
    if op == "hardswish":
        return f"({x} * {_min(_max(f'{x} + 3.0', '0.0'), '6.0')} / 6.0)"
    if op == "hardsigmoid":
        return f"({_min(_max(f'{x} + 3.0', '0.0'), '6.0')} / 6.0)"
    if op == "hardtanh":
        return _min(_max(x, _f(ins.attr("lo"))), _f(ins.attr("hi")))
    if op == "elu":
        return f"tl.where({x} > 0.0, {x}, {_f(ins.attr('alpha'))} * (tl.exp(tl.minimum({x}, 0.0)) - 1.0))"
    if op == "selu":
        return (f"(1.0507009873554805 * tl.where({x} > 0.0, {x}, "
                f"1.6732632423543772 * (tl.exp(tl.minimum({x}, 0.0)) - 1.0)))")
    if op == "softplus":
        return _softplus(x, ins.attr("beta"), ins.attr("threshold"))
    if op == "softsign":
        return f"({x} / (1.0 + tl.abs({x})))"
    if op == "leaky_relu":
        return f"tl.where({x} > 0.0, {x}, {x} * {_f(ins.attr('slope'))})"
    if op == "clamp":
        e = x
        if ins.attr("lo") is not None:
            e = _max(e, _f(ins.attr("lo")))
        if ins.attr("hi") is not None:
            e = _min(e, _f(ins.attr("hi")))
        return e
    unary = {"exp": "tl.exp({})", "log": "tl.log({})", "sqrt": "tl.sqrt({})", "rsqrt": "tl.rsqrt({})",
             "abs": "tl.abs({})", "neg": "(-{})", "reciprocal": "(1.0 / {})", "identity": "({})"}
    if op in unary:
        return unary[op].format(x)
    y = a[1]
    if op == "masked_fill_eq":
        return f"tl.where({y} == {_f(ins.attr('c'))}, {_f(ins.attr('v'))}, {x})"
    binary = {"add": "({} + {})", "sub": "({} - {})", "mul": "({} * {})", "div": "({} / {})",
              "maximum": _max("{}", "{}"), "minimum": _min("{}", "{}")}
    if op in binary:
        return binary[op].format(x, y)
    if op == "pow":
        e = ins.args[1].value
        if float(e).is_integer() and 1 <= e <= 4:
            return "(" + " * ".join([x] * int(e)) + ")"
        special = {0.5: f"tl.sqrt({x})", -1.0: f"(1.0 / {x})", -0.5: f"tl.rsqrt({x})"}
        if e in special:
            return special[e]
        return f"tl.exp({_f(e)} * tl.log({x}))"
    raise ValueError(f"no Triton expression for pointwise op {op!r}")


# reductions: (init value, combine, tl reduce function, finalize)
TRITON_REDUCE = {
    "sum": ("0.0", "{a} + {v}", "tl.sum", "{a}"),
    "mean": ("0.0", "{a} + {v}", "tl.sum", "{a} / L"),
    "max": ("float('-inf')", "tl.maximum({a}, {v})", "tl.max", "{a}"),
    "min": ("float('inf')", "tl.minimum({a}, {v})", "tl.min", "{a}"),
    "norm_l2": ("0.0", "{a} + {v} * {v}", "tl.sum", "tl.sqrt({a})"),
    "norm_l1": ("0.0", "{a} + tl.abs({v})", "tl.sum", "{a}"),
    "prod": ("1.0", "{a} * {v}", "_prod_reduce", "{a}"),
}


MUL_COMBINE = """@triton.jit
def _mul_combine(a, b):
    return a * b


@triton.jit
def _prod_reduce(x, axis: tl.constexpr):
    return tl.reduce(x, axis, _mul_combine)
"""
