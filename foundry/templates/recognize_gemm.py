"""Recognise a forward that is exactly one matrix product of two of its inputs
(torch.matmul / torch.mm / torch.bmm / `@`), either operand possibly transposed in the
last two dims (`.T`, `.t()`, `.mT`, `.transpose`, `.permute`), into a `Gemm`. A first
operand of more than three dims times a matrix (matmul, or an einsum such as
"bijl,lk->bijk") is one product over its flattened leading dims; two operands of more
than three dims with the same leading dims (attention's `scores @ values`) are one
batched product over those dims flattened."""

from __future__ import annotations

import math
import operator

import torch
import torch.fx as fx

from foundry.templates.fxutil import NotCovered, dtype_of, shape_of
from foundry.templates.ir import FLOATS, Description, Gemm

_PRODUCT_FUNCTIONS = {torch.matmul, torch.mm, torch.bmm, operator.matmul}
_PRODUCT_METHODS = {"matmul", "mm", "bmm"}


def _is_product(node: fx.Node) -> bool:
    if node.op == "call_function":
        return node.target in _PRODUCT_FUNCTIONS or node.target is torch.einsum
    return node.op == "call_method" and node.target in _PRODUCT_METHODS


def _einsum_operands(node: fx.Node) -> tuple:
    """The two operands of an einsum that is a tensor times a matrix over the tensor's
    last dim ("bijl,lk->bijk": distinct letters, the output the tensor's leading letters
    then the matrix's last); raises NotCovered for any other einsum."""
    equation, *operands = node.args
    if node.kwargs or not isinstance(equation, str) or len(operands) != 2:
        raise NotCovered("the matrix-product template takes an einsum of two tensors with an equation")
    terms = equation.replace(" ", "").split("->")
    inputs = terms[0].split(",") if len(terms) == 2 else []
    if len(inputs) != 2 or "." in equation:
        raise NotCovered(f"the einsum {equation!r} is not a tensor times a matrix")
    (a, b), out = inputs, terms[1]
    lead, k = a[:-1], a[-1:]
    if not (len(b) == 2 and b[0] == k and out == lead + b[1] and len(set(a + b[1])) == len(a) + 1):
        raise NotCovered(f"the einsum {equation!r} is not a tensor times a matrix over the tensor's last dim")
    return tuple(operands)


def _swapped_dims(node: fx.Node, rank: int) -> bool | None:
    """True when `node` swaps the last two dims of its input (of rank `rank`) and nothing
    else; False when it is some other transpose or permutation; None when it is no
    transpose at all."""
    if node.op == "call_function" and node.target is getattr and node.args[1] in ("T", "mT"):
        return node.args[1] == "mT" or rank == 2
    if node.op == "call_method" and node.target == "t":
        return rank == 2
    if (node.op == "call_method" and node.target == "transpose") or \
            (node.op == "call_function" and node.target is torch.transpose):
        dims = list(node.args[1:3]) + [node.kwargs.get(k) for k in ("dim0", "dim1") if k in node.kwargs]
        if len(dims) != 2 or not all(isinstance(d, int) for d in dims):
            return False
        return sorted(d % rank for d in dims) == [rank - 2, rank - 1]
    if (node.op == "call_method" and node.target == "permute") or \
            (node.op == "call_function" and node.target is torch.permute):
        dims = node.args[1:] if node.op == "call_method" else node.args[1:2]
        if node.kwargs.get("dims") is not None:
            dims = (node.kwargs["dims"],)
        dims = dims[0] if len(dims) == 1 and isinstance(dims[0], (list, tuple)) else dims
        if not all(isinstance(d, int) for d in dims):
            return False
        return [d % rank for d in dims] == [*range(rank - 2), rank - 1, rank - 2]
    return None


def _input_expression(node: fx.Node) -> str | None:
    """The forward expression of an input: a parameter, or an item of a `*args` one."""
    if node.op == "placeholder":
        return None if str(node.target).startswith("*") else str(node.target)
    if node.op == "call_function" and node.target is operator.getitem:
        src, index = node.args
        if isinstance(src, fx.Node) and src.op == "placeholder" and str(src.target).startswith("*") \
                and isinstance(index, int):
            return f"{str(src.target).lstrip('*')}[{index}]"
    return None


def _rank(node: fx.Node) -> int:
    shape = shape_of(node)
    return len(shape) if shape is not None else 0


def _operand(node) -> tuple[str, bool]:
    """(input expression, transposed) of one operand of the product. Raises NotCovered
    when it is not an input, transposed or not."""
    if not isinstance(node, fx.Node):
        raise NotCovered("the matrix product has an operand that is not a tensor input")
    swapped = _swapped_dims(node, _rank(node))
    if swapped is False:
        raise NotCovered("the matrix product reads an input permuted other than by swapping its last two dims")
    src = node.args[0] if swapped else node
    expr = _input_expression(src) if isinstance(src, fx.Node) else None
    if expr is None:
        raise NotCovered("the matrix product reads a computed tensor, not a forward input (or its transpose)")
    return expr, bool(swapped)


def describe_gemm(gm: fx.GraphModule) -> Description | None:
    """The Description of a traced forward that is exactly one matrix product of two of
    its inputs; None when the forward computes anything else. Raises NotCovered when it is
    such a product (of inputs, permuted or not) in a form the template does not take (a
    1-D operand, 4-D and more with other leading dims, a permutation other than a
    transpose, integer or mixed dtypes)."""
    nodes = [n for n in gm.graph.nodes if n.op not in ("placeholder", "output")]
    products = [n for n in nodes if _is_product(n)]
    out = next(n for n in gm.graph.nodes if n.op == "output")
    if len(products) != 1 or out.args[0] is not products[0]:
        return None
    (product,) = products
    if product.target is torch.einsum:
        operands = _einsum_operands(product)
    elif product.kwargs or len(product.args) != 2:
        return None
    else:
        operands = product.args
    if any(_swapped_dims(n, _rank(n)) is None and _input_expression(n) is None for n in nodes if n is not product):
        return None  # more than the product and views of inputs: the regions may still cover it
    (a, trans_a), (b, trans_b) = (_operand(x) for x in operands)
    sa, sb = (shape_of(x) for x in operands)
    if len(sa) < 2 or len(sb) < 2:
        raise NotCovered("a matrix-vector product (a 1-D operand) is not covered by the matrix-product template")
    flat = len(sa) > 3 and len(sb) == 2 and not trans_a
    stacked = len(sa) > 3 and len(sb) == len(sa) and tuple(sa[:-2]) == tuple(sb[:-2])
    if max(len(sa), len(sb)) > 3 and not (flat or stacked):
        raise NotCovered("the matrix-product template takes 2-D and 3-D (batched) operands, N-D operands with "
                         "the same leading dims, or an N-D first operand (not transposed) times a matrix")
    da, db = (dtype_of(x) for x in operands)
    if da != db or da not in FLOATS:
        raise NotCovered(f"the matrix-product template reads operands of one dtype among {', '.join(FLOATS)} "
                         f"(got {da} and {db})")
    places = [str(n.target) for n in gm.graph.nodes if n.op == "placeholder"]
    if flat:  # one product over the first operand's leading dims, viewed back
        gemm = Gemm(a=a, b=b, trans_b=trans_b, dtype=da, m=math.prod(int(d) for d in sa[:-1]),
                    n=int(sb[-1]), k=int(sa[-1]))
        call = f"self._gemm({a}.reshape(-1, {a}.shape[-1]), {b}).view(*{a}.shape[:-1], -1)"
    elif stacked:  # a batched product over the leading dims both share, flattened, viewed back
        gemm = Gemm(a=a, b=b, trans_a=trans_a, trans_b=trans_b, dtype=da, batch=math.prod(int(d) for d in sa[:-2]),
                    m=int(sa[-2]), n=int(sb[-1]), k=int(sa[-1]))
        flat_a, flat_b = (f"{x}.reshape(-1, *{x}.shape[-2:])" for x in (a, b))
        call = f"self._gemm({flat_a}, {flat_b}).unflatten(0, {a}.shape[:-2])"
    else:
        batch = max(s[0] if len(s) == 3 else 1 for s in (sa, sb))  # torch checked they broadcast
        gemm = Gemm(a=a, b=b, trans_a=trans_a, trans_b=trans_b, dtype=da, batch=batch,
                    m=int(sa[-2]), n=int(sb[-1]), k=int(sa[-1]))
        call = f"self._gemm({a}, {b})"
    fwd = f"def forward(self, {', '.join(places)}):\n    return {call}\n"
    return Description(regions=(), forward_src=fwd, gemm=gemm)
