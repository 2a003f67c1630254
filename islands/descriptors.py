"""Descriptors: deterministic static analysis of a candidate's source.

`describe(source=..., backend=...)` splits the file into kernel code (Triton: the
@triton.jit functions; cuda / cuda_inline / c: the triple-quoted strings holding C/CUDA
code) and host code (the Python around it), drops comments, and matches the backend's
pattern table (islands/patterns_*.py) on the three axes memory, compute, parallelism.
The result carries the levels (0..3 each), the names of the patterns that matched,
a few static features (used by optional extra axes) and a hint for the next prompt.
The same text always gives the same descriptor.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Sequence

from islands import patterns_c, patterns_cuda, patterns_triton
from islands.patterns import AXES, LEVEL_NAMES, PatternTable

TABLES: dict[str, PatternTable] = {
    "triton": patterns_triton.TABLE,
    "cuda": patterns_cuda.TABLE,
    "cuda_inline": patterns_cuda.INLINE_TABLE,
    "c": patterns_c.TABLE,
}

_C_COMMENTS = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_PY_COMMENT = re.compile(
    r"#(?!\s*(?:include|pragma|define|undef|if|ifdef|ifndef|elif|else|endif|error)\b)[^\n]*")
_CODE_STRING_HINT = re.compile(r"__global__|__device__|#\s*include|\)\s*(?:const\s*)?\{")
_TRITON_JIT = re.compile(r"@triton\.jit\b")
_FORWARD = re.compile(r"def\s+forward\s*\(")
_CUDA_KERNEL = re.compile(r"__global__[\w\s()]*?\bvoid\s+(\w+)")
_C_FN = re.compile(
    r"(?:void|int|float|double|long|int64_t|int32_t)[ \t]+([A-Za-z_]\w*)[ \t]*\([^)]*\)"
    r"[ \t\n]*\{")
_C_EXPORT_PREFIX = re.compile(r"[ \t]*(?:extern[ \t]+(?:\"C\"[ \t]+)?)?")
_DEF_NAME = re.compile(r"def\s+(\w+)")
_INLINE_FUNCTIONS = re.compile(r"functions\s*=\s*\[([^\]]*)\]")
_QUOTED_NAME = re.compile(r"[\"'](\w+)[\"']")
# torch calls in forward that only allocate or describe tensors (not compute)
_TORCH_NON_COMPUTE = frozenset((
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like",
    "full", "full_like", "tensor", "as_tensor", "device", "Size", "cuda", "no_grad",
    "inference_mode", "is_tensor", "broadcast_shapes", "finfo", "iinfo",
    "get_default_dtype"))
_TORCH_CALL = re.compile(r"torch\.(\w+)[\w.]*\s*\(")
_FUNCTIONAL_CALL = re.compile(r"(?<![\w.])F\.\w+\s*\(")
_TENSOR_METHOD = re.compile(
    r"\.(sum|mean|amax|amin|exp|log|matmul|mm|bmm|softmax|log_softmax|relu|sigmoid|tanh|"
    r"gelu|add|sub|mul|div|pow|sqrt|rsqrt|norm|clamp|abs|cumsum|einsum|conv\w*|linear|"
    r"max_pool\w*|avg_pool\w*|var|std|argmax|argmin|topk|sort)\s*\(")
_MATMUL_OPERATOR = re.compile(r"[\w)\]]\s+@\s+[\w(]")
_TUNABLE = re.compile(r"(?<![\w.])TUNABLE\s*(?::[^=\n]*)?=\s*(?:dict\s*\(|\{)(.*?)[})]\s*$", re.M | re.S)
_TUNABLE_KEY = re.compile(r"""["'](\w+)["']\s*:|\b(\w+)\s*=""")


@dataclass(frozen=True)
class Descriptor:
    """levels: (memory, compute, parallelism), each 0..3. matched: axis -> names of the
    patterns that matched on that axis. features: static features of the source."""

    backend: str
    levels: tuple[int, int, int]
    matched: dict = field(default_factory=dict)
    features: dict = field(default_factory=dict)

    def level(self, axis: str) -> int:
        return self.levels[AXES.index(axis)]

    def values(self, *, axis_names: Sequence[str]) -> tuple[float, ...]:
        """The value of each named grid axis: a level for the three level axes, else the
        static feature of that name."""
        out = []
        for name in axis_names:
            if name in AXES:
                out.append(self.levels[AXES.index(name)])
            elif name in self.features:
                out.append(self.features[name])
            else:
                raise ValueError(f"descriptor has no axis or feature named {name!r}; "
                                 f"known: {list(AXES) + sorted(self.features)}")
        return tuple(out)

    def hint(self) -> str:
        """One line per axis: where the kernel is and what the next level would take."""
        advice = TABLES[self.backend].advice
        lines = []
        for axis, level in zip(AXES, self.levels):
            names = self.matched.get(axis, ())
            here = f"{axis} level {level} ({LEVEL_NAMES[axis][level]}"
            here += f"; matched: {', '.join(names)})" if names else ")"
            if level < 3:
                nxt = level + 1
                lines.append(f"{here}; try level {nxt}: {LEVEL_NAMES[axis][nxt]} - "
                             f"{advice[axis][nxt]}")
            else:
                lines.append(f"{here}; top level - refine it rather than climb")
        return "\n".join(lines)


def _split_triple_strings(source: str) -> tuple[str, list[str]]:
    """(the source with every triple-quoted string removed, the strings' contents)."""
    outside: list[str] = []
    strings: list[str] = []
    pos = 0
    while True:
        a, b = source.find('"""', pos), source.find("'''", pos)
        starts = [x for x in (a, b) if x >= 0]
        if not starts:
            outside.append(source[pos:])
            break
        start = min(starts)
        quote = source[start:start + 3]
        end = source.find(quote, start + 3)
        if end < 0:  # unterminated: treat the rest as a string
            outside.append(source[pos:start])
            strings.append(source[start + 3:])
            break
        outside.append(source[pos:start])
        strings.append(source[start + 3:end])
        pos = end + 3
    return "".join(outside), strings


@dataclass(frozen=True)
class _Split:
    kernel: str
    host: str
    kernel_names: tuple[str, ...]


def _split_triton(source: str) -> _Split:
    text, _ = _split_triple_strings(source)
    text = _PY_COMMENT.sub("", text)
    lines = text.split("\n")
    kernel_lines: list[str] = []
    host_lines: list[str] = []
    jit_starts = {text.count("\n", 0, m.start()) for m in _TRITON_JIT.finditer(text)
                  if not text[text.rfind("\n", 0, m.start()) + 1:m.start()].strip()}
    i = 0
    while i < len(lines):
        if i in jit_starts:
            # take the decorator(s), the def line and the indented body
            j = i
            while j < len(lines) and not lines[j].lstrip().startswith("def "):
                j += 1
            if j == len(lines):
                host_lines.extend(lines[i:])
                break
            indent = len(lines[j]) - len(lines[j].lstrip())
            k = j + 1
            while k < len(lines) and (not lines[k].strip() or
                                      len(lines[k]) - len(lines[k].lstrip()) > indent):
                k += 1
            kernel_lines.extend(lines[i:k])
            i = k
        else:
            host_lines.append(lines[i])
            i += 1
    kernel = "\n".join(kernel_lines)
    return _Split(kernel=kernel, host="\n".join(host_lines),
                  kernel_names=tuple(_jit_names(kernel, len(jit_starts))))


def _jit_names(kernel: str, count: int) -> list[str]:
    names = [n for n in _DEF_NAME.findall(kernel)]
    # nested helpers inside a kernel are not kernels: keep one name per @triton.jit
    return names[:count] if len(names) >= count else names + [""] * (count - len(names))


def _split_c_like(source: str, *, backend: str) -> _Split:
    host, strings = _split_triple_strings(source)
    code_parts = [body for body in strings if _CODE_STRING_HINT.search(body)]
    host = _PY_COMMENT.sub("", host)
    kernel = _C_COMMENTS.sub("", "\n".join(code_parts))
    if backend == "c":
        names = [m.group(1) for m in _C_FN.finditer(kernel) if _C_EXPORT_PREFIX.fullmatch(
            kernel, kernel.rfind("\n", 0, m.start()) + 1, m.start())]
    else:
        names = _CUDA_KERNEL.findall(kernel)
    return _Split(kernel=kernel, host=host, kernel_names=tuple(names))


def _forward_body(host: str) -> str | None:
    m = _FORWARD.search(host)
    if m is None:
        return None
    line_start = host.rfind("\n", 0, m.start()) + 1
    indent = m.start() - line_start
    lines = host[m.end():].split("\n")
    body = [lines[0]]
    for line in lines[1:]:
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        body.append(line)
    return "\n".join(body)


def _torch_compute_in(forward: str, *, own: set[str]) -> bool:
    """Whether `forward` computes with torch ops (not counting the candidate's own kernels
    called as methods, e.g. `self.mod.relu(...)`, nor allocations)."""
    if "torch." in forward and any(name not in _TORCH_NON_COMPUTE
                                   for name in _TORCH_CALL.findall(forward)):
        return True
    if "F." in forward and _FUNCTIONAL_CALL.search(forward):
        return True
    if any(name not in own for name in _TENSOR_METHOD.findall(forward)):
        return True
    return "@" in forward and _MATMUL_OPERATOR.search(forward) is not None


def _tunable_count(source: str) -> int:
    m = _TUNABLE.search(source) if "TUNABLE" in source else None
    if m is None:
        return 0
    return len({a or b for a, b in _TUNABLE_KEY.findall(m.group(1))})


def source_features(*, source: str, kernel_count: int) -> dict[str, float]:
    return {
        "source_lines": sum(map(bool, map(str.strip, source.split("\n")))),
        "kernel_count": kernel_count,
        "tunable_count": _tunable_count(source),
    }


_PLANS: dict[str, tuple] = {}


def _plan(table: PatternTable) -> tuple:
    """The table's patterns ordered so that every requirement is evaluated before the
    patterns that need it, each with its requirements as tuples of alternatives."""
    plan = _PLANS.get(table.backend)
    if plan is not None:
        return plan
    by_name = {p.name: p for p in table.patterns}
    order: list = []
    state: dict[str, int] = {}  # 1: visiting, 2: done

    def visit(name: str) -> None:
        if name.startswith("@") or state.get(name) == 2:
            return
        if name not in by_name or state.get(name) == 1:
            raise ValueError(f"{table.backend}: pattern requirement {name!r} is unknown "
                             f"or cyclic")
        state[name] = 1
        p = by_name[name]
        for req in p.requires:
            for alt in req.split("|"):
                visit(alt)
        state[name] = 2
        order.append((p, tuple(tuple(req.split("|")) for req in p.requires)))

    for p in table.patterns:
        visit(p.name)
    _PLANS[table.backend] = plan = tuple(order)
    return plan


def describe(*, source: str, backend: str) -> Descriptor:
    """The descriptor of a candidate file's `source` written for `backend`."""
    table = TABLES.get(backend)
    if table is None:
        raise ValueError(f"unknown backend {backend!r}; known: {', '.join(TABLES)}")
    split = _split_triton(source) if backend == "triton" else _split_c_like(
        source, backend=backend)
    forward = _forward_body(split.host)
    own = set(split.kernel_names)
    for m in _INLINE_FUNCTIONS.finditer(split.host):  # load_inline(functions=[...])
        own.update(_QUOTED_NAME.findall(m.group(1)))
    torch_in_forward = forward is not None and _torch_compute_in(forward, own=own)
    kernel_count = len(split.kernel_names)
    facts = {"@single_kernel": kernel_count == 1 and not torch_in_forward}
    texts = {"kernel": split.kernel, "host": split.host,
             "all": split.kernel + "\n" + split.host}
    ok: dict[str, bool] = dict(facts)
    for p, alternatives in _plan(table):  # requirements come before the patterns needing them
        ok[p.name] = all(any(ok.get(a, False) for a in alts) for alts in alternatives) \
            and p.search(texts[p.scope])
    levels = []
    matched = {}
    for axis in AXES:
        names = tuple(p.name for p in table.patterns if p.axis == axis and ok[p.name])
        matched[axis] = names
        levels.append(max((p.level for p in table.patterns
                           if p.axis == axis and ok[p.name]), default=0))
    return Descriptor(backend=backend, levels=tuple(levels), matched=matched,
                      features=source_features(source=source, kernel_count=kernel_count))
