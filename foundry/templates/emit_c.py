"""The `c` backend emitter: a Region -> one C function (OpenMP over rows/blocks, SIMD
inner loops, the whole pointwise chain + row op in one pass over memory).

Placeholders filled at construction from PARAMS: @BLOCK@ (elements per pointwise task),
@IBLOCK@ (columns per task when a row op runs over a non-last dim), @SIMD@ (an optional
`simdlen(n)` clause), @SCHED@ (OpenMP schedule).
"""

from __future__ import annotations

from foundry.templates.c_ops import C_DTYPE, C_MATH, C_REDUCE, c_pointwise
from foundry.templates.ir import Phase, Region
from foundry.templates.launch import phase_ints

TUNABLE_C = {"BLOCK": [4096, 1024, 16384, 65536], "IBLOCK": [256, 64, 16],
             "SIMD": [0, 8, 16], "SCHED": ["static", "dynamic"]}


def _load(phase: Phase, k: int, tag: str, ctx: str) -> tuple[str, str | None]:
    fv = "f" if tag == "p" else "g"
    """(expression, hoisted line or None) reading operand k of a phase."""
    o = phase.operands[k]
    cast = "" if o.dtype == "float32" else "(float)"
    p, K, M = f"{tag}{k}", f"K{tag}", f"M{tag}{k}"
    lay = o.layout
    if phase.split == 0 and lay == "col":
        lay = "full"
    if ctx == "rj":
        if lay == "full":
            return f"{cast}{p}[rK + j]", None
        if lay == "col":
            return f"{cast}{p}[j]", None
        if lay == "scalar":
            return f"s{tag}{k}", f"const float s{tag}{k} = {cast}{p}[0];"
        if lay == "row":
            return f"s{tag}{k}", f"const float s{tag}{k} = {cast}{p}[r % {M}];"
        return f"{cast}{p}[b{tag}{k} + j]", f"const int64_t b{tag}{k} = (r % {M}) * {K};"
    idx = {"full": "f", "col": f"f % {K}", "scalar": "0", "row": f"(f / {K}) % {M}",
           "rowcol": f"((f / {K}) % {M}) * {K} + f % {K}"}[lay].replace("f", fv)
    return f"{cast}{p}[{idx}]", None


def phase_code(phase: Phase, tag: str, ctx: str, row_expr: str = "") -> tuple[list, list, str]:
    """(hoisted lines, body lines, result expression) of a phase; `tag` "p" (pre) or
    "q" (post); ctx "rj" (row r, column j) or "f" (flat index f)."""
    hoisted, body, loads = [], [], {}

    def arg(ref):
        if ref.kind == "val":
            return f"v{tag}{ref.index}"
        if ref.kind == "row":
            return row_expr
        if ref.kind == "const":
            v = ref.value
            return f"{v!r}f" if ("." in repr(v) or "e" in repr(v)) else f"{v!r}.f"
        if ref.index not in loads:
            e, h = _load(phase, ref.index, tag, ctx)
            if h:
                hoisted.append(h)
            loads[ref.index] = e
        return loads[ref.index]

    for i, ins in enumerate(phase.body):
        body.append(f"const float v{tag}{i} = {c_pointwise(ins, [arg(r) for r in ins.args])};")
    return hoisted, body, arg(phase.result)


def _params(region: Region) -> list:
    params = []
    for k, o in enumerate(region.pre.operands):
        params.append((f"const {C_DTYPE[o.dtype]}* restrict", f"p{k}"))
    if region.post is not None:
        for k, o in enumerate(region.post.operands):
            params.append((f"const {C_DTYPE[o.dtype]}* restrict", f"q{k}"))
    if region.row is not None:
        if region.row.weight:
            params.append(("const float* restrict", "w"))
        if region.row.bias:
            params.append(("const float* restrict", "bb"))
        if region.row.index:
            params.append(("const int64_t* restrict", "ix"))
    params.append((f"{C_DTYPE[region.out_dtype]}* restrict", "out"))
    params += [("int64_t", n) for n in phase_ints(region)]
    return params


def _indent(lines, n):
    return "\n".join(" " * n + ln for ln in lines)


def _kernel(region: Region, paths: list) -> str:
    """A kernel from task bodies: paths = [(condition or None, task count, body lines)].
    Each body becomes a static function of one task `t` whose pointer arguments are
    `restrict` (so stores do not force reloads); the exported function runs the tasks
    in an OpenMP loop."""
    params = _params(region)
    decl = ", ".join(f"{t} {n}" for t, n in params)
    call = ", ".join(n for _, n in params)
    ints = phase_ints(region)
    exported = ", ".join(f"{t} {n}" for t, n in params if t != "int64_t") + ", const int64_t* restrict sz"
    unpack = [f"const int64_t {n} = sz[{i}];" for i, n in enumerate(ints)]
    out, branches = [], []
    for k, (cond, count, body) in enumerate(paths):
        fn = f"{region.name}_task{k}"
        out.append(f"static inline void {fn}({decl}, int64_t t) {{\n{_indent(body, 4)}\n}}\n")
        loop = (f"#pragma omp parallel for schedule(@SCHED@)\n"
                f"for (int64_t t = 0; t < {count}; t++) {fn}({call}, t);")
        branches.append((cond, loop))
    if len(branches) == 1:
        inner = _indent(branches[0][1].splitlines(), 4)
    else:
        inner = "\n".join(_indent([("if" if i == 0 else "} else if") + f" ({c}) {{" if c else "} else {",
                                   *["    " + x for x in b.splitlines()]], 4)
                          for i, (c, b) in enumerate(branches)) + "\n    }"
    out.append(f"void {region.name}({exported}) {{\n{_indent(unpack, 4)}\n{inner}\n}}\n")
    return "\n".join(out)


def _pre_at(region: Region, f: str) -> tuple[list, str]:
    """Lines computing the pre value at flat index expression `f`, and its name."""
    hoisted, body, res = phase_code(region.pre, "p", "f")
    return [f"const int64_t f = {f};"] + hoisted + body, res


def _post_write(region: Region, g: str, value: str) -> list:
    if region.post is None:
        return [f"out[{g}] = {value};"]
    hoisted, body, res = phase_code(region.post, "q", "f", row_expr="rv")
    return ["{", f"    const float rv = {value};", f"    const int64_t g = {g};",
            *["    " + x for x in hoisted + body], f"    out[g] = {res};", "}"]


def emit_region_c(region: Region) -> str:
    """The C source of one region (with @...@ placeholders)."""
    if region.row is None:
        return _kernel(region, [(None, "Rp * ((Kp + @BLOCK@ - 1) / @BLOCK@)", _pointwise_body(region))])
    fam = region.row.family
    make = {"reduce": _reduce_paths, "softmax": _softmax_paths, "norm": _norm_paths,
            "scan": _scan_paths, "pool": _pool_paths, "loss": _loss_paths}.get(fam)
    if make is None:
        raise ValueError(f"no C template for row family {fam!r}")
    return _kernel(region, make(region))


def _pointwise_body(region: Region) -> list:
    hoisted, body, res = phase_code(region.pre, "p", "rj")
    return ["const int64_t nb = (Kp + @BLOCK@ - 1) / @BLOCK@;",
            "const int64_t r = t / nb, j0 = (t % nb) * @BLOCK@;",
            "const int64_t j1 = j0 + @BLOCK@ < Kp ? j0 + @BLOCK@ : Kp;",
            "const int64_t rK = r * Kp;", *hoisted,
            "#pragma omp simd @SIMD@", "for (int64_t j = j0; j < j1; j++) {",
            *["    " + x for x in body], f"    out[rK + j] = {res};", "}"]


_TRANSCENDENTAL = {"exp", "log", "tanh", "sigmoid", "gelu", "silu", "mish", "elu", "selu", "softplus", "pow",
                   "sqrt", "rsqrt", "div", "reciprocal"}


def _loop(var: str, n: str, body: list, pragma: str = "", reverse: bool = False) -> list:
    head = [pragma] if pragma else []
    return head + [f"for (int64_t {var} = 0; {var} < {n}; {var}++) {{", *["    " + x for x in body], "}"]


def _reduce_paths(region: Region) -> list:
    kind = region.row.kind
    paths = []
    for contiguous in (True, False):
        pre, v = _pre_at(region, "base + l" if contiguous else "base + l * inner")
        head = ["const int64_t o = t / inner, i = t % inner;", "(void)o; (void)i;",
                "const int64_t base = o * L * inner + i;"]
        if kind in C_REDUCE:
            init, comb, fin, red = C_REDUCE[kind]
            if not contiguous:
                break
            body = head + [f"float acc = {init};"] + _loop("l", "L", pre + [f"acc = {comb.format(a='acc', v=v)};"],
                                                           f"#pragma omp simd reduction({red}:acc)")
            final = fin.format(a="acc", L="L")
        elif kind == "logsumexp":
            body = head + ["float m = -INFINITY;"] + _loop("l", "L", pre + [f"m = kf_max(m, {v});"],
                                                           "#pragma omp simd reduction(max:m)" if contiguous else "")
            body += ["float acc = 0.f;"] + _loop("l", "L", pre + [f"acc += kf_exp({v} - m);"],
                                                  "#pragma omp simd reduction(+:acc)" if contiguous else "")
            final = "(m == -INFINITY ? m : m + kf_log(acc))"
        elif kind in ("argmax", "argmin") and contiguous:
            red, fn, init = ("max", "kf_max", "-INFINITY") if kind == "argmax" else ("min", "kf_min", "INFINITY")
            body = head + [f"float best = {init};"] + _loop("l", "L", pre + [f"best = {fn}(best, {v});"],
                                                            f"#pragma omp simd reduction({red}:best)")
            body += ["int64_t bi = 0;", "for (int64_t l = 0; l < L; l++) {", *["    " + x for x in pre],
                     f"    if ({v} == best) {{ bi = l; break; }}", "}"]
            final = "bi"
        elif kind in ("argmax", "argmin"):
            cmp = ">" if kind == "argmax" else "<"
            body = head + ["float best = 0.f; int64_t bi = 0;"] + _loop(
                "l", "L", pre + [f"const float x = {v};", f"if (l == 0 || x {cmp} best) {{ best = x; bi = l; }}"])
            final = "bi"
        else:
            raise ValueError(f"no C template for reduction {kind!r}")
        paths.append(("inner == 1" if contiguous else None, "outer * inner",
                      body + _post_write(region, "t", final)))
    if kind in C_REDUCE:
        init, comb, fin, _ = C_REDUCE[kind]
        pre, v = _pre_at(region, "o * L * inner + l * inner + c")
        body = ["const int64_t nb = (inner + @IBLOCK@ - 1) / @IBLOCK@;",
                "const int64_t o = t / nb, c0 = (t % nb) * @IBLOCK@;",
                "const int64_t c1 = c0 + @IBLOCK@ < inner ? c0 + @IBLOCK@ : inner;",
                "float acc[@IBLOCK@];", f"for (int64_t c = c0; c < c1; c++) acc[c - c0] = {init};"]
        inner_loop = ["#pragma omp simd", "for (int64_t c = c0; c < c1; c++) {", *["    " + x for x in pre],
                      f"    acc[c - c0] = {comb.format(a='acc[c - c0]', v=v)};", "}"]
        body += _loop("l", "L", inner_loop)
        body += ["for (int64_t c = c0; c < c1; c++) {",
                 *["    " + x for x in _post_write(region, "o * inner + c", fin.format(a="acc[c - c0]", L="L"))], "}"]
        paths.append((None, "outer * ((inner + @IBLOCK@ - 1) / @IBLOCK@)", body))
    return paths


def _softmax_paths(region: Region) -> list:
    log = region.row.kind == "log_softmax"
    pre, v = _pre_at(region, "base + l")
    red = lambda r: f"#pragma omp simd reduction({r})"  # noqa: E731
    body = ["const int64_t base = t * L;", "float m = -INFINITY;"]
    body += _loop("l", "L", pre + [f"m = kf_max(m, {v});"], red("max:m"))
    if log:
        body += ["float s = 0.f;"] + _loop("l", "L", pre + [f"s += kf_exp({v} - m);"], red("+:s"))
        body += ["const float ls = kf_log(s);"]
        body += _loop("l", "L", pre + [f"const float e = {v} - m - ls;"] + _post_write(region, "f", "e"),
                      "#pragma omp simd")
    else:  # exp once: store it, then scale in place
        body += ["float s = 0.f;"] + _loop("l", "L", pre + [f"const float e = kf_exp({v} - m);", "out[f] = e;",
                                                             "s += e;"], red("+:s"))
        body += ["const float inv = 1.f / s;"]
        body += _loop("l", "L", ["const int64_t f = base + l;", "const float e = out[f] * inv;"]
                      + _post_write(region, "f", "e"), "#pragma omp simd")
    # softmax over a non-last dim: blocks of IBLOCK columns, each pass vectorised across them
    pre_c, vc = _pre_at(region, "o * L * inner + l * inner + c")
    col = ["const int64_t nb = (inner + @IBLOCK@ - 1) / @IBLOCK@;",
           "const int64_t o = t / nb, c0 = (t % nb) * @IBLOCK@;",
           "const int64_t c1 = c0 + @IBLOCK@ < inner ? c0 + @IBLOCK@ : inner;",
           "float m[@IBLOCK@], s[@IBLOCK@];",
           "for (int64_t c = c0; c < c1; c++) { m[c - c0] = -INFINITY; s[c - c0] = 0.f; }"]
    col += _loop("l", "L", ["#pragma omp simd", "for (int64_t c = c0; c < c1; c++) {",
                            *["    " + x for x in pre_c], f"    m[c - c0] = kf_max(m[c - c0], {vc});", "}"])
    col += _loop("l", "L", ["#pragma omp simd", "for (int64_t c = c0; c < c1; c++) {",
                            *["    " + x for x in pre_c], f"    s[c - c0] += kf_exp({vc} - m[c - c0]);", "}"])
    write = (f"const float e = {vc} - m[c - c0] - kf_log(s[c - c0]);" if log else
             f"const float e = kf_exp({vc} - m[c - c0]) / s[c - c0];")
    col += _loop("l", "L", ["#pragma omp simd", "for (int64_t c = c0; c < c1; c++) {",
                            *["    " + x for x in pre_c + [write] + _post_write(region, "f", "e")], "}"])
    return [("inner == 1", "outer", body), (None, "outer * ((inner + @IBLOCK@ - 1) / @IBLOCK@)", col)]


def _norm_paths(region: Region) -> list:
    row = region.row
    if row.kind == "group":
        return _group_norm_paths(region)
    pre, v = _pre_at(region, "base + l")
    widx = {"layer": "l", "rms": "l"}.get(row.kind, "o % C")
    scale = f" * w[{widx}]" if row.weight else ""
    shift = f" + bb[{widx}]" if row.bias else ""
    red = lambda r: f"#pragma omp simd reduction({r})"  # noqa: E731
    body = ["const int64_t o = t;", "const int64_t base = o * L;"]
    if row.kind == "rms":
        body += ["float ss = 0.f;"] + _loop("l", "L", pre + [f"ss += {v} * {v};"], red("+:ss"))
        body += [f"const float mean = 0.f, rstd = 1.f / sqrtf(ss / (float)L + {row.eps!r}f);"]
    else:
        body += ["float sm = 0.f;"] + _loop("l", "L", pre + [f"sm += {v};"], red("+:sm"))
        body += ["const float mean = sm / (float)L;", "float sv = 0.f;"]
        body += _loop("l", "L", pre + [f"const float d = {v} - mean;", "sv += d * d;"], red("+:sv"))
        body += [f"const float rstd = 1.f / sqrtf(sv / (float)L + {row.eps!r}f);"]
    body += _loop("l", "L", pre + [f"const float e = ({v} - mean) * rstd{scale}{shift};"]
                  + _post_write(region, "f", "e"), "#pragma omp simd")
    return [(None, "outer", body)]


def _group_norm_paths(region: Region) -> list:
    """GroupNorm: row o = (n, g) over Cg channels x HW positions, walked as a nested
    (channel, position) loop so per-channel operands and affine weights are hoisted."""
    row = region.row
    by_channel = region.pre.split == 2
    if by_channel:
        hoisted, body_pre, v = phase_code(region.pre, "p", "rj")
        pre_h = ["const int64_t r = o * Cg + cc, rK = r * HW;", *hoisted]
        pre_i = ["const int64_t j = h, f = rK + j;", "(void)f;", *body_pre]
    else:
        hoisted, body_pre, v = phase_code(region.pre, "p", "f")
        pre_h = ["const int64_t rK = base + cc * HW;", *hoisted]
        pre_i = ["const int64_t f = rK + h;", *body_pre]
    red = lambda r: f"#pragma omp simd reduction({r})"  # noqa: E731

    def nest(inner, pragma, head=()):
        return ["for (int64_t cc = 0; cc < Cg; cc++) {", *["    " + x for x in pre_h + list(head)],
                *["    " + x for x in _loop("h", "HW", pre_i + inner, pragma)], "}"]

    ws = ["const float ws = w[(o % G) * Cg + cc];" if row.weight else "const float ws = 1.f;",
          "const float bs = bb[(o % G) * Cg + cc];" if row.bias else "const float bs = 0.f;"]
    body = ["const int64_t o = t;", "const int64_t base = o * L;", "(void)base;", "float sm = 0.f;"]
    body += nest([f"sm += {v};"], red("+:sm"))
    body += ["const float mean = sm / (float)L;", "float sv = 0.f;"]
    body += nest([f"const float d = {v} - mean;", "sv += d * d;"], red("+:sv"))
    body += [f"const float rstd = 1.f / sqrtf(sv / (float)L + {row.eps!r}f);"]
    body += nest(["const float e = (" + v + " - mean) * rstd * ws + bs;"] + _post_write(region, "f", "e"),
                 "#pragma omp simd", ws)
    # HW == 1 (features of a Linear): one flat, vectorised loop per pass
    pre_f, vf = _pre_at(region, "base + l")
    wf = "w[(o % G) * Cg + l]" if row.weight else "1.f"
    bf = "bb[(o % G) * Cg + l]" if row.bias else "0.f"
    flat = ["const int64_t o = t;", "const int64_t base = o * L;", "float sm = 0.f;"]
    flat += _loop("l", "L", pre_f + [f"sm += {vf};"], red("+:sm"))
    flat += ["const float mean = sm / (float)L;", "float sv = 0.f;"]
    flat += _loop("l", "L", pre_f + [f"const float d = {vf} - mean;", "sv += d * d;"], red("+:sv"))
    flat += [f"const float rstd = 1.f / sqrtf(sv / (float)L + {row.eps!r}f);"]
    flat += _loop("l", "L", pre_f + [f"const float e = ({vf} - mean) * rstd * {wf} + {bf};"]
                  + _post_write(region, "f", "e"), "#pragma omp simd")
    return [("HW == 1", "outer", flat), (None, "outer", body)]


def _scan_paths(region: Region) -> list:
    row = region.row
    op, init = ("+", "0.0") if row.kind == "cumsum" else ("*", "1.0")
    lexpr = "(L - 1 - ll)" if row.reverse else "ll"

    def update(v, acc):  # double accumulator, as torch's CPU scan
        if row.exclusive:
            return [f"const double x = (double){v};", f"const float e = (float){acc};", f"{acc} = {acc} {op} x;"]
        return [f"const double x = (double){v};", f"{acc} = {acc} {op} x;", f"const float e = (float){acc};"]

    pre, v = _pre_at(region, f"base + {lexpr}")
    row_body = ["const int64_t o = t;", "const int64_t base = o * L;", f"double acc = {init};"]
    if any(i.op in _TRANSCENDENTAL for i in region.pre.body):
        # a costly chain before the scan vectorises in its own pass (into out); the scan reads it back
        row_body += _loop("ll", "L", pre + [f"out[f] = {v};"], "#pragma omp simd")
        row_body += _loop("ll", "L", [f"const int64_t f = base + {lexpr};"] + update("out[f]", "acc")
                          + _post_write(region, "f", "e"))
    else:
        row_body += _loop("ll", "L", pre + update(v, "acc") + _post_write(region, "f", "e"))
    pre_c, vc = _pre_at(region, f"o * L * inner + {lexpr} * inner + c")
    col_body = ["const int64_t nb = (inner + @IBLOCK@ - 1) / @IBLOCK@;",
                "const int64_t o = t / nb, c0 = (t % nb) * @IBLOCK@;",
                "const int64_t c1 = c0 + @IBLOCK@ < inner ? c0 + @IBLOCK@ : inner;",
                "double acc[@IBLOCK@];", f"for (int64_t c = c0; c < c1; c++) acc[c - c0] = {init};"]
    col_body += _loop("ll", "L", ["#pragma omp simd", "for (int64_t c = c0; c < c1; c++) {",
                                  *["    " + x for x in pre_c + update(vc, "acc[c - c0]")
                                    + _post_write(region, "f", "e")], "}"])
    return [("inner == 1", "outer", row_body),
            (None, "outer * ((inner + @IBLOCK@ - 1) / @IBLOCK@)", col_body)]


def c_source(regions) -> str:
    """The whole C translation unit for a description's regions."""
    return C_MATH + "\n" + "\n".join(emit_region_c(r) for r in regions)


def fill(src: str, params: dict) -> str:
    """Substitute the @...@ placeholders with PARAMS values."""
    simd = int(params.get("SIMD", 0))
    return (src.replace("@BLOCK@", str(int(params.get("BLOCK", 4096))))
               .replace("@IBLOCK@", str(int(params.get("IBLOCK", 64))))
               .replace("@SIMD@", f"simdlen({simd})" if simd else "")
               .replace("@SCHED@", str(params.get("SCHED", "static"))))


_POOL_CHUNK = 256  # outputs of one row accumulated together (a stack buffer)


def _first_last(var: str, start: str, size: str, extent: int, dilation: int) -> list:
    """C lines bounding window offsets `var`0..`var`1 (exclusive) to those whose element
    `start` + offset * dilation lies inside [0, size)."""
    up = f"(-{start} + {dilation - 1}) / {dilation}" if dilation > 1 else f"-{start}"
    left = f"{size} - {start}"
    fits = f"({left} + {dilation - 1}) / {dilation}" if dilation > 1 else left
    return [f"const int64_t {var}0 = {start} < 0 ? {up} : 0;",
            f"const int64_t {var}1 = {left} <= 0 ? 0 : ({fits} < {extent} ? {fits} : {extent});"]


def _times(var: str, factor: int) -> str:
    return var if factor == 1 else f"{var} * {factor}"


def _pool_paths(region: Region) -> list:
    """1-3-D pooling, as a 3-D window (a 1-D or 2-D one has depth and height 1): one task
    per output row (n*c, od, oh). Outputs are accumulated in chunks of a row: for each
    window offset (e, a, b) a SIMD loop over the outputs whose element is inside the input
    (the range is clipped once, no per-element bounds tests), then the post chain on each
    pooled value. The pre chain runs on every window element read. Max propagates NaN as
    torch does."""
    window = region.row.window
    (kd, kh, kw), (sd, sh, sw), (pd, ph, pw), (dd, dh, dw) = window.as_3d()
    is_max = region.row.kind == "max"
    split = region.pre.split
    col = f"ow * {sw} - {pw} + {_times('b', dw)}"
    if split in (0, 2):  # rows of the pre phase are whole images (n, c) or all of it: per-channel
        # operands are read once per task, elements by (r, j) without divisions
        hoisted, lines, v = phase_code(region.pre, "p", "rj")
        first = ["const int64_t r = " + ("nc" if split == 2 else "0") + ";", "const int64_t rK = r * Kp;",
                 "(void)rK;", *hoisted]
        pre = [f"const int64_t j = rowbase - rK + {col};", *lines]
    else:
        first = []
        pre, v = _pre_at(region, f"rowbase + {col}")
    # NaN first, then the larger: the form GCC vectorizes with and without trapping math (the
    # `a > b || a != a` form stayed scalar under -fno-trapping-math after a ReLU)
    step = (f"acc[ow - c0] = {v} != {v} ? {v} : ({v} > acc[ow - c0] ? {v} : acc[ow - c0]);" if is_max
            else f"acc[ow - c0] += {v};")
    reach = f"{pw} - {_times('b', dw)}"  # how far before the output's window start offset b reads
    offsets = [f"for (int64_t b = 0; b < {kw}; b++) {{",
               f"    const int64_t lo0 = {reach} > 0 ? ({reach} + {sw - 1}) / {sw} : 0;",
               f"    const int64_t num = W - 1 + {reach};",
               f"    const int64_t hi0 = num < 0 ? 0 : num / {sw} + 1;",
               "    const int64_t lo = lo0 > c0 ? lo0 : c0, hi = hi0 < c1 ? hi0 : c1;",
               "    #pragma omp simd", "    for (int64_t ow = lo; ow < hi; ow++) {",
               *["        " + x for x in pre + [step]], "    }", "}"]
    rows = ["for (int64_t a = a0; a < a1; a++) {",
            f"    const int64_t rowbase = ((nc * D + d0 + {_times('e', dd)}) * H + h0 + {_times('a', dh)}) * W;",
            *["    " + x for x in offsets], "}"]
    planes = ["for (int64_t e = e0; e < e1; e++) {", *["    " + x for x in rows], "}"]
    if is_max:
        value = "acc[ow - c0]"
    elif window.count_include_pad:
        value = f"acc[ow - c0] * {1.0 / (kd * kh * kw)!r}f"
    else:  # avg pooling has no dilation: the part of the window inside the input
        value = "acc[ow - c0] / (float)((e1 - e0) * (a1 - a0) * (b1 - b0))"
    finish = [f"const int64_t w0 = ow * {sw} - {pw};", *_first_last("b", "w0", "W", kw, dw), "(void)b0; (void)b1;",
              *_post_write(region, "t * OW + ow", value)]
    body = ["const int64_t ncd = t / OH, oh = t % OH;", "const int64_t nc = ncd / OD, od = ncd % OD;", *first,
            f"const int64_t h0 = oh * {sh} - {ph};", *_first_last("a", "h0", "H", kh, dh),
            f"const int64_t d0 = od * {sd} - {pd};", *_first_last("e", "d0", "D", kd, dd),
            f"float acc[{_POOL_CHUNK}];",
            f"for (int64_t c0 = 0; c0 < OW; c0 += {_POOL_CHUNK}) {{",
            *["    " + x for x in [
                f"const int64_t c1 = c0 + {_POOL_CHUNK} < OW ? c0 + {_POOL_CHUNK} : OW;",
                f"for (int64_t i = 0; i < c1 - c0; i++) acc[i] = {'-INFINITY' if is_max else '0.f'};",
                *planes, "for (int64_t ow = c0; ow < c1; ow++) {", *["    " + x for x in finish], "}"]],
            "}"]
    return [(None, "outer * OD * OH", body)]


def _loss_paths(region: Region) -> list:
    """Cross entropy over rows of L classes: the row's logsumexp (the pre chain on each
    element) less the pre value at the row's class; 0 where the class is ignore_index,
    NaN where it is outside the row (torch raises there). "none": one task per row; "sum"
    and "mean": one task over every row, summing in double (a mean divides by the rows
    not ignored: 0 of them gives NaN, as torch)."""
    row = region.row
    pre, v = _pre_at(region, "base + l")
    at_class, picked = _pre_at(region, "base + c")
    loss = ["const int64_t base = r * L;", "float m = -INFINITY;",
            *_loop("l", "L", pre + [f"m = kf_max(m, {v});"], "#pragma omp simd reduction(max:m)"),
            "float acc = 0.f;",
            *_loop("l", "L", pre + [f"acc += kf_exp({v} - m);"], "#pragma omp simd reduction(+:acc)"),
            "const int64_t c = ix[r];", "float loss = 0.f;",
            f"if (c != {row.ignore_index}) {{",
            "    if (c < 0 || c >= L) {", "        loss = NAN;", "    } else {",
            *["        " + x for x in at_class],
            f"        loss = (m == -INFINITY ? m : m + kf_log(acc)) - {picked};", "    }", "}"]
    if row.reduction == "none":
        return [(None, "outer", ["const int64_t r = t;", *loss, *_post_write(region, "t", "loss")])]
    value = "(float)total" if row.reduction == "sum" else "(float)(total / (double)counted)"
    body = ["(void)t;", "double total = 0.0;", "int64_t counted = 0;",
            "for (int64_t r = 0; r < outer; r++) {", *["    " + x for x in loss],
            "    total += loss;", f"    counted += ix[r] != {row.ignore_index};", "}",
            *_post_write(region, "0", value)]
    return [(None, "1", body)]
