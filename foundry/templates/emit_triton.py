"""The `triton` backend emitter: a Region -> @triton.jit kernels and their launch lines.

Families: pointwise (flat 1-D grid of BLOCK-sized tiles), row reductions (one program
per row with BLOCK-wide accumulators when rows are contiguous, and few long rows split
over programs whose partials a second kernel combines; one program per BLOCK columns,
walking the reduced dim, when rows are not contiguous, so loads stay coalesced), softmax
and norms (split-row: a stats kernel per (row, chunk), its statistics taken in one pass
by Welford's update per lane, and an apply kernel that merges the chunk statistics, so
few long rows still fill the GPU), scans (chunked tl.cumsum
with a carry), 1-3-D pooling (a tile of output rows x columns per program, the window
unrolled), cross
entropy (one program per row; a reduced loss sums the rows' losses in a second kernel).
"""

from __future__ import annotations

from foundry.templates.ir import FLOAT_BYTES, Phase, Region
from foundry.templates.launch import phase_ints
from foundry.templates.triton_ops import MUL_COMBINE, TRITON_REDUCE, triton_pointwise

TUNABLE_TRITON = {"BLOCK": [1024, 256, 512, 2048, 4096], "num_warps": [4, 2, 8], "SPLIT": [1, 8, 32, 128]}


def _load(phase: Phase, k: int, tag: str, ctx: str, mask: str, other: str = "0") -> str:
    o = phase.operands[k]
    p, K, M = f"{tag}{k}", f"K{tag}", f"M{tag}{k}"
    fv = "f" if tag == "p" else "g"
    cast = "" if o.dtype == "float32" else ".to(tl.float32)"
    lay = o.layout
    if phase.split == 0 and lay == "col":
        lay = "full"
    if lay == "scalar":
        return f"tl.load({p}){cast}"
    if ctx == "rj":
        idx = {"full": f"r * {K} + j", "col": "j", "row": f"r % {M}", "rowcol": f"(r % {M}) * {K} + j"}[lay]
        if lay == "row":
            return f"tl.load({p} + {idx}){cast}"
    elif ctx == "plane":  # the phase's rows are the (sample, channel) planes, `nc` the element's
        idx = {"full": fv, "col": f"({fv} - nc * {K})", "row": f"nc % {M}",
               "rowcol": f"(nc % {M}) * {K} + ({fv} - nc * {K})"}[lay]
    else:
        idx = {"full": fv, "col": f"{fv} % {K}", "row": f"({fv} // {K}) % {M}",
               "rowcol": f"(({fv} // {K}) % {M}) * {K} + {fv} % {K}"}[lay]
    if mask:
        return f"tl.load({p} + {idx}, mask={mask}, other={other}){cast}"
    return f"tl.load({p} + {idx}){cast}"


def phase_code(phase: Phase, tag: str, ctx: str, mask: str, row_expr: str = "", other: str = "0") -> tuple[list, str]:
    """(lines, result expression) of a phase in Triton; a masked load reads `other` where
    `mask` is false."""
    lines, loads = [], {}

    def arg(ref):
        if ref.kind == "val":
            return f"v{tag}{ref.index}"
        if ref.kind == "row":
            return row_expr
        if ref.kind == "const":
            return repr(float(ref.value))
        if ref.index not in loads:
            name = f"x{tag}{ref.index}"
            lines.append(f"{name} = {_load(phase, ref.index, tag, ctx, mask, other)}")
            loads[ref.index] = name
        return loads[ref.index]

    for i, ins in enumerate(phase.body):
        expr = triton_pointwise(ins, [arg(r) for r in ins.args])
        lines.append(f"v{tag}{i} = {expr}")
    return lines, arg(phase.result)


def _params(region: Region) -> list:
    names = [f"p{k}" for k in range(len(region.pre.operands))]
    if region.post is not None:
        names += [f"q{k}" for k in range(len(region.post.operands))]
    if region.row is not None:
        names += [n for n, present in (("w", region.row.weight), ("bb", region.row.bias), ("ix", region.row.index))
                  if present]
    return names + ["out"] + phase_ints(region)


def _kernel(name: str, region: Region, body: list, extra: tuple = (), do_not_specialize: tuple = ()) -> str:
    """A @triton.jit kernel `name` over the region's parameters, `extra` ones and BLOCK;
    `do_not_specialize`: integer parameters Triton compiles for any value (not for their
    divisibility by 16 or a value of 1)."""
    params = ", ".join(_params(region) + list(extra) + ["BLOCK: tl.constexpr"])
    text = "\n".join("    " + ln for ln in body)
    jit = f"@triton.jit(do_not_specialize={list(do_not_specialize)!r})" if do_not_specialize else "@triton.jit"
    return f"{jit}\ndef {name}({params}):\n{text}\n"


def _store(region: Region, g: str, value: str, mask: str, ctx: str = "f") -> list:
    """Lines storing `value` (the post phase applied, its operands read in context `ctx`)
    at flat output indices `g` under `mask`."""
    if region.post is None:
        res = value
        lines = []
    else:
        lines, res = phase_code(region.post, "q", ctx, mask, row_expr="rv")
        lines = [f"rv = {value}", f"g = {g}"] + lines
        g = "g"
    m = f", mask={mask}" if mask else ""
    return lines + [f"tl.store(out + {g}, {res}{m})"]


def _pre(region: Region, f: str, mask: str, ctx: str = "f", other: str = "0") -> tuple[list, str]:
    lines, v = phase_code(region.pre, "p", ctx, mask, other=other)
    head = [f"f = {f}"] if ctx in ("f", "plane") else []
    return head + lines, v


def _loop(var: str, start: str, stop: str, step: str, body: list) -> list:
    return [f"for {var} in range({start}, {stop}, {step}):", *["    " + x for x in body]]


def _static_loop(var: str, start: str, stop: str, step: str, body: list) -> list:
    """`_loop` unrolled by Triton's compiler (bounds known when the kernel is written)."""
    return [f"for {var} in tl.static_range({start}, {stop}, {step}):", *["    " + x for x in body]]


def emit_region_triton(region: Region) -> tuple[str, list]:
    """(kernel source, launch lines) for one region. Launch lines may use the size names,
    `args` (the kernel's pointer arguments as a list) and `self.params`."""
    if region.row is None:
        return _pointwise(region)
    fam = region.row.family
    make = {"reduce": _reduce, "softmax": _softmax, "norm": _norm, "scan": _scan, "pool": _pool,
            "loss": _loss}.get(fam)
    if make is None:
        raise ValueError(f"no Triton template for row family {fam!r}")
    return make(region)


def _call(kernel: str, region: Region, grid: str, extra: str = "") -> str:
    ints = ", ".join(phase_ints(region))
    ptrs = ", ".join(f"a{i}" for i in range(len(region.inputs))) + ", out"
    ex = f", {extra}" if extra else ""
    return (f"{kernel}[({grid},)]({ptrs}, {ints}{ex}, BLOCK=B, "
            f"num_warps=self.params['num_warps'])")


def _pointwise(region: Region):
    name = f"{region.name}_pointwise"
    lines, v = phase_code(region.pre, "p", "rj", "m")
    body = ["pid = tl.program_id(0)", "nb = tl.cdiv(Kp, BLOCK)", "r = (pid // nb).to(tl.int64)",
            "j = (pid % nb) * BLOCK + tl.arange(0, BLOCK)", "m = j < Kp", *lines,
            f"tl.store(out + r * Kp + j, {v}, mask=m)"]
    launch = ["B = int(self.params['BLOCK'])", _call(name, region, "Rp * triton.cdiv(Kp, B)")]
    return _kernel(name, region, body), launch


def _reduce(region: Region):
    kind = region.row.kind
    rname, cname = f"{region.name}_rows", f"{region.name}_cols"
    # contiguous rows: one program per row
    pre, v = _pre(region, "base + l", "msk")
    loop_head = ["l = l0 + tl.arange(0, BLOCK)", "msk = l < L"]
    if kind in TRITON_REDUCE:
        init, comb, red, fin = TRITON_REDUCE[kind]
        rbody = ["o = tl.program_id(0).to(tl.int64)", "base = o * L",
                 f"acc = tl.full([BLOCK], {init}, tl.float32)"]
        rbody += _loop("l0", "0", "L", "BLOCK", loop_head + pre +
                       [f"acc = tl.where(msk, {comb.format(a='acc', v=v)}, acc)"])
        rbody += [f"res = {fin.format(a=red + '(acc, axis=0)')}"]
    elif kind == "logsumexp":
        rbody = ["o = tl.program_id(0).to(tl.int64)", "base = o * L",
                 "mx = tl.full([BLOCK], float('-inf'), tl.float32)"]
        rbody += _loop("l0", "0", "L", "BLOCK", loop_head + pre + [f"mx = tl.where(msk, tl.maximum(mx, {v}), mx)"])
        rbody += ["mm = tl.max(mx, axis=0)", "acc = tl.zeros([BLOCK], tl.float32)"]
        rbody += _loop("l0", "0", "L", "BLOCK", loop_head + pre + [f"acc += tl.where(msk, tl.exp({v} - mm), 0.0)"])
        rbody += ["res = mm + tl.log(tl.sum(acc, axis=0))"]
    elif kind in ("argmax", "argmin"):
        better = ">" if kind == "argmax" else "<"
        pad = "float('-inf')" if kind == "argmax" else "float('inf')"
        pick = "tl.argmax" if kind == "argmax" else "tl.argmin"
        rbody = ["o = tl.program_id(0).to(tl.int64)", "base = o * L", f"best = {pad}", "bi = 0"]
        rbody += _loop("l0", "0", "L", "BLOCK", loop_head + pre + [
            f"vv = tl.where(msk, {v}, {pad})", f"k = {pick}(vv, axis=0)",
            "bv = tl.max(tl.where(tl.arange(0, BLOCK) == k, vv, float('-inf')), axis=0)" if kind == "argmax"
            else "bv = tl.min(tl.where(tl.arange(0, BLOCK) == k, vv, float('inf')), axis=0)",
            f"take = (l0 == 0) | (bv {better} best)",
            "bi = tl.where(take, l0 + k, bi)", "best = tl.where(take, bv, best)"])
        rbody += ["res = bi.to(tl.int64)"]
    else:
        raise ValueError(f"no Triton template for reduction {kind!r}")
    rbody += _store(region, "o", "res", "")
    src = _kernel(rname, region, rbody)
    # strided rows: one program per BLOCK columns, walking the reduced dim
    pre_c, vc = _pre(region, "o * L * inner + l * inner + c", "msk")
    cbody = ["pid = tl.program_id(0)", "nb = tl.cdiv(inner, BLOCK)", "o = (pid // nb).to(tl.int64)",
             "c = (pid % nb) * BLOCK + tl.arange(0, BLOCK)", "msk = c < inner"]
    if kind in TRITON_REDUCE:
        init, comb, _, fin = TRITON_REDUCE[kind]
        cbody += [f"acc = tl.full([BLOCK], {init}, tl.float32)"]
        cbody += _loop("l", "0", "L", "1", pre_c + [f"acc = {comb.format(a='acc', v=vc)}"])
        cbody += [f"res = {fin.format(a='acc')}"]
    elif kind == "logsumexp":
        cbody += ["mx = tl.full([BLOCK], float('-inf'), tl.float32)"]
        cbody += _loop("l", "0", "L", "1", pre_c + [f"mx = tl.maximum(mx, {vc})"])
        cbody += ["acc = tl.zeros([BLOCK], tl.float32)"]
        cbody += _loop("l", "0", "L", "1", pre_c + [f"acc += tl.exp({vc} - mx)"])
        cbody += ["res = mx + tl.log(acc)"]
    else:
        better = ">" if kind == "argmax" else "<"
        cbody += ["best = tl.zeros([BLOCK], tl.float32)", "bi = tl.zeros([BLOCK], tl.int64)"]
        cbody += _loop("l", "0", "L", "1", pre_c + [f"take = (l == 0) | ({vc} {better} best)",
                                                  f"best = tl.where(take, {vc}, best)", "bi = tl.where(take, l, bi)"])
        cbody += ["res = bi"]
    cbody += _store(region, "o * inner + c", "res", "msk")
    src += "\n\n" + _kernel(cname, region, cbody)
    launch = ["B = int(self.params['BLOCK'])", "if inner == 1:",
              "    " + _call(rname, region, "outer"), "else:",
              "    " + _call(cname, region, "outer * triton.cdiv(inner, B)")]
    if kind in TRITON_REDUCE:  # few long rows: split each over programs, then combine
        split_src, launch = _split_reduce(region, launch)
        src += "\n\n" + split_src
    if kind == "prod":
        src = MUL_COMBINE.replace("_mul_combine", f"{region.name}_mul").replace(
            "_prod_reduce", f"{region.name}_prod") + "\n\n" + src.replace("_prod_reduce", f"{region.name}_prod")
    return src, launch


UNROLLED_WINDOW = 64  # a pooling window of up to this many taps is unrolled in the kernel
W_CHUNK = 4  # the stride-1 pooling form's W chunk, consecutive inputs read by one aligned load (split in two halvings)
W_CHUNKED_TAPS = 16  # a stride-1 W window of up to this many taps is read in chunks
SPLIT_PROGRAMS = 1024  # a reduction over contiguous rows splits each row until about this many programs run


def _split_reduce(region: Region, launch: list) -> tuple[str, list]:
    """A reduction over few long contiguous rows (a loss's mean over every element, a sum
    over all but a small dim): each row split in SP chunks, one program per chunk writing
    its partial (`_part`), then one program per row combining its SP partials, finishing
    and applying the post chain (`_fin`). SP brings outer * SP to about SPLIT_PROGRAMS
    (or to SPLIT per row where that is more), at most one chunk per BLOCK. Rows that come
    out as one chunk use the one-program-per-row kernel."""
    init, comb, red, fin = TRITON_REDUCE[region.row.kind]
    pname, fname = f"{region.name}_part", f"{region.name}_fin"
    pre, v = _pre(region, "base + l", "msk")
    pbody = ["pid = tl.program_id(0)", *_CHUNK, f"acc = tl.full([BLOCK], {init}, tl.float32)"]
    pbody += _loop("l0", "start", "stop", "BLOCK", ["l = l0 + tl.arange(0, BLOCK)", "msk = l < stop", *pre,
                                                    f"acc = tl.where(msk, {comb.format(a='acc', v=v)}, acc)"])
    pbody += [f"tl.store(part + pid, {red}(acc, axis=0))"]
    fbody = ["o = tl.program_id(0).to(tl.int64)", "k = tl.arange(0, SPLIT_P2)",
             f"pv = tl.load(part + o * SPLIT + k, mask=k < SPLIT, other={init})",
             f"res = {fin.format(a=red + '(pv, axis=0)')}", *_store(region, "o", "res", "")]
    extra = ("part", "SPLIT", "SPLIT_P2: tl.constexpr")
    src = _kernel(pname, region, pbody, extra) + "\n\n" + _kernel(fname, region, fbody, extra)
    split = ["B = int(self.params['BLOCK'])",
             f"SP = min(max(int(self.params['SPLIT']), triton.cdiv({SPLIT_PROGRAMS}, outer)), triton.cdiv(L, B))",
             "if inner == 1 and SP > 1:",
             "    part = torch.empty(outer * SP, dtype=torch.float32, device=out.device)",
             "    " + _call(pname, region, "outer * SP", "part, SP, SPLIT_P2=triton.next_power_of_2(SP)"),
             "    " + _call(fname, region, "outer", "part, SP, SPLIT_P2=triton.next_power_of_2(SP)"),
             "el" + launch[1]]
    return src, split + launch[2:]


_CHUNK = ["o = (pid // SPLIT).to(tl.int64)", "s = pid % SPLIT", "base = o * L",
          "chunk = tl.cdiv(tl.cdiv(L, SPLIT), BLOCK) * BLOCK", "start = s * chunk",
          "stop = tl.minimum(start + chunk, L)"]


def _softmax(region: Region):
    log = region.row.kind == "log_softmax"
    st, ap, cn = f"{region.name}_stats", f"{region.name}_apply", f"{region.name}_cols"
    pre, v = _pre(region, "base + l", "msk")
    head = ["l = l0 + tl.arange(0, BLOCK)", "msk = l < stop"]
    sbody = ["pid = tl.program_id(0)", *_CHUNK, "m = tl.full([BLOCK], float('-inf'), tl.float32)",
             "acc = tl.zeros([BLOCK], tl.float32)"]
    sbody += _loop("l0", "start", "stop", "BLOCK", head + pre + [
        f"vv = tl.where(msk, {v}, float('-inf'))", "mn = tl.maximum(m, vv)",
        "safe = tl.where(mn == float('-inf'), 0.0, mn)",
        "acc = acc * tl.exp(m - safe) + tl.exp(vv - safe)", "m = mn"])
    sbody += ["mm = tl.max(m, axis=0)", "safe = tl.where(mm == float('-inf'), 0.0, mm)",
              "ss = tl.sum(acc * tl.exp(m - safe), axis=0)",
              "tl.store(part + pid * 2, mm)", "tl.store(part + pid * 2 + 1, ss)"]
    abody = ["pid = tl.program_id(0)", *_CHUNK, "k = tl.arange(0, SPLIT_P2)", "km = k < SPLIT",
             "pm = tl.load(part + (o * SPLIT + k) * 2, mask=km, other=float('-inf'))",
             "ps = tl.load(part + (o * SPLIT + k) * 2 + 1, mask=km, other=0.0)",
             "mm = tl.max(pm, axis=0)", "tot = tl.sum(ps * tl.exp(pm - mm), axis=0)",
             "ls = tl.log(tot)", "inv = 1.0 / tot"]
    write = f"{v} - mm - ls" if log else f"tl.exp({v} - mm) * inv"
    abody += _loop("l0", "start", "stop", "BLOCK", head + pre + _store(region, "f", write, "msk"))
    extra = ("part", "SPLIT", "SPLIT_P2: tl.constexpr")
    src = _kernel(st, region, sbody, extra) + "\n\n" + _kernel(ap, region, abody, extra)
    # softmax over a non-last dim: one program per BLOCK columns
    pre_c, vc = _pre(region, "o * L * inner + l * inner + c", "msk")
    cbody = ["pid = tl.program_id(0)", "nb = tl.cdiv(inner, BLOCK)", "o = (pid // nb).to(tl.int64)",
             "c = (pid % nb) * BLOCK + tl.arange(0, BLOCK)", "msk = c < inner",
             "mm = tl.full([BLOCK], float('-inf'), tl.float32)"]
    cbody += _loop("l", "0", "L", "1", pre_c + [f"mm = tl.maximum(mm, {vc})"])
    cbody += ["tot = tl.zeros([BLOCK], tl.float32)"]
    cbody += _loop("l", "0", "L", "1", pre_c + [f"tot += tl.exp({vc} - mm)"])
    cbody += ["ls = tl.log(tot)", "inv = 1.0 / tot"]
    writec = f"{vc} - mm - ls" if log else f"tl.exp({vc} - mm) * inv"
    cbody += _loop("l", "0", "L", "1", pre_c + _store(region, "f", writec, "msk"))
    src += "\n\n" + _kernel(cn, region, cbody)
    launch = ["B = int(self.params['BLOCK'])", "if inner == 1:",
              "    SP = max(1, min(int(self.params['SPLIT']), triton.cdiv(L, B)))",
              "    part = torch.empty(outer * SP * 2, dtype=torch.float32, device=out.device)",
              "    " + _call(st, region, "outer * SP", "part, SP, SPLIT_P2=triton.next_power_of_2(SP)"),
              "    " + _call(ap, region, "outer * SP", "part, SP, SPLIT_P2=triton.next_power_of_2(SP)"),
              "else:", "    " + _call(cn, region, "outer * triton.cdiv(inner, B)")]
    return src, launch


def _norm(region: Region):
    row = region.row
    st, ap = f"{region.name}_stats", f"{region.name}_apply"
    pre, v = _pre(region, "base + l", "msk")
    head = ["l = l0 + tl.arange(0, BLOCK)", "msk = l < stop"]
    sbody = ["pid = tl.program_id(0)", *_CHUNK, "n = tl.maximum(stop - start, 0).to(tl.float32)",
             "acc = tl.zeros([BLOCK], tl.float32)"]
    if row.kind == "rms":
        sbody += _loop("l0", "start", "stop", "BLOCK", head + pre + [f"acc += tl.where(msk, {v} * {v}, 0.0)"])
        sbody += ["tl.store(part + pid * 3, n)", "tl.store(part + pid * 3 + 1, 0.0)",
                  "tl.store(part + pid * 3 + 2, tl.sum(acc, axis=0))"]
    else:
        # one pass: each lane keeps its elements' count, mean and sum of squared deviations
        # (Welford's update; the mean's division the fast one, its rounding error far below
        # the tolerance), merged across the lanes as the apply kernel merges the chunks
        sbody += ["cnt = tl.zeros([BLOCK], tl.float32)", "mean = tl.zeros([BLOCK], tl.float32)"]
        sbody += _loop("l0", "start", "stop", "BLOCK", head + pre + [
            "cnt += msk.to(tl.float32)", f"d = tl.where(msk, {v} - mean, 0.0)",
            "mean += tl.fdiv(d, tl.maximum(cnt, 1.0))", f"acc += d * tl.where(msk, {v} - mean, 0.0)"])
        sbody += ["mc = tl.sum(cnt * mean, axis=0) / tl.maximum(n, 1.0)", "dm = mean - mc",
                  "tl.store(part + pid * 3, n)", "tl.store(part + pid * 3 + 1, mc)",
                  "tl.store(part + pid * 3 + 2, tl.sum(acc, axis=0) + tl.sum(cnt * dm * dm, axis=0))"]
    abody = ["pid = tl.program_id(0)", *_CHUNK, "k = tl.arange(0, SPLIT_P2)", "km = k < SPLIT",
             "pn = tl.load(part + (o * SPLIT + k) * 3, mask=km, other=0.0)",
             "pmean = tl.load(part + (o * SPLIT + k) * 3 + 1, mask=km, other=0.0)",
             "pm2 = tl.load(part + (o * SPLIT + k) * 3 + 2, mask=km, other=0.0)",
             "ntot = tl.sum(pn, axis=0)"]
    if row.kind == "rms":
        abody += ["mean = 0.0", f"rstd = 1.0 / tl.sqrt(tl.sum(pm2, axis=0) / ntot + {row.eps!r})"]
    else:
        abody += ["mean = tl.sum(pn * pmean, axis=0) / ntot", "dm = pmean - mean",
                  "m2 = tl.sum(pm2, axis=0) + tl.sum(pn * dm * dm, axis=0)",
                  f"rstd = 1.0 / tl.sqrt(m2 / ntot + {row.eps!r})"]
    widx = {"layer": "l", "rms": "l", "group": "(o % G) * Cg + l // HW"}.get(row.kind, "o % C + l * 0")
    scale = f" * tl.load(w + {widx}, mask=msk, other=0.0)" if row.weight else ""
    shift = f" + tl.load(bb + {widx}, mask=msk, other=0.0)" if row.bias else ""
    abody += _loop("l0", "start", "stop", "BLOCK", head + pre + _store(
        region, "f", f"({v} - mean) * rstd{scale}{shift}", "msk"))
    extra = ("part", "SPLIT", "SPLIT_P2: tl.constexpr")
    src = _kernel(st, region, sbody, extra) + "\n\n" + _kernel(ap, region, abody, extra)
    launch = ["B = int(self.params['BLOCK'])",
              "SP = max(1, min(int(self.params['SPLIT']), triton.cdiv(L, B)))",
              "part = torch.empty(outer * SP * 3, dtype=torch.float32, device=out.device)",
              _call(st, region, "outer * SP", "part, SP, SPLIT_P2=triton.next_power_of_2(SP)"),
              _call(ap, region, "outer * SP", "part, SP, SPLIT_P2=triton.next_power_of_2(SP)")]
    return src, launch


def _scan(region: Region):
    row = region.row
    prod = row.kind == "cumprod"
    rn, cn = f"{region.name}_rows", f"{region.name}_cols"
    lexpr = "(L - 1 - l)" if row.reverse else "l"
    pre, v = _pre(region, f"base + {lexpr}", "msk")
    fill = "1.0" if prod else "0.0"
    # a product in float64: a block's scan multiplies in a tree, and a float32 partial
    # product can overflow (or reach 0) where the running product in order stays finite;
    # torch's CPU scan accumulates in double too
    carry = "tl.full([1], 1.0, tl.float64)" if prod else fill
    scanned = "tl.cumprod(x.to(tl.float64), axis=0) * carry" if prod else "tl.cumsum(x, axis=0) + carry"
    result = "inc.to(tl.float32)" if prod else "inc - x" if row.exclusive else "inc"
    rbody = ["o = tl.program_id(0).to(tl.int64)", "base = o * L", f"carry = {carry}"]
    step = ["l = l0 + tl.arange(0, BLOCK)", "msk = l < L", *pre, f"x = tl.where(msk, {v}, {fill})",
            f"inc = {scanned}", f"e = {result}", *_store(region, "f", "e", "msk"),
            "carry = tl.sum(tl.where(tl.arange(0, BLOCK) == BLOCK - 1, inc, 0.0), axis=0"
            + (", keep_dims=True)" if prod else ")")]
    rbody += _loop("l0", "0", "L", "BLOCK", step)
    pre_c, vc = _pre(region, f"o * L * inner + {lexpr} * inner + c", "msk")
    cbody = ["pid = tl.program_id(0)", "nb = tl.cdiv(inner, BLOCK)", "o = (pid // nb).to(tl.int64)",
             "c = (pid % nb) * BLOCK + tl.arange(0, BLOCK)", "msk = c < inner",
             f"acc = tl.full([BLOCK], {fill}, tl.float32)"]
    upd = ([f"x = {vc}", "e = acc", "acc = acc + x"] if row.exclusive else
           [f"x = {vc}", f"acc = acc {'*' if prod else '+'} x", "e = acc"])
    cbody += _loop("l", "0", "L", "1", pre_c + upd + _store(region, "f", "e", "msk"))
    src = _kernel(rn, region, rbody) + "\n\n" + _kernel(cn, region, cbody)
    launch = ["B = int(self.params['BLOCK'])", "if inner == 1:", "    " + _call(rn, region, "outer"),
              "else:", "    " + _call(cn, region, "outer * triton.cdiv(inner, B)")]
    return src, launch


def _plane_context(phase) -> str:
    """How a pooling kernel's phase reads its operands: "plane" where the phase's rows are
    exactly its (sample, channel) planes (a per-channel operand, as a BatchNorm's, is then
    read at the tile row's `nc`, with no 64-bit division per element and tap: on an H100 a
    deployed transition layer, its BatchNorm's four operands read at (f // K) % M in its
    pooling kernel, took about three times what its bytes need, most likely for those
    divisions), else "f"."""
    return "plane" if phase is not None and phase.split == 2 else "f"


def _pool_tap(region: Region, identity: str) -> tuple[list, str]:
    """(lines, value): the pre chain at input element row_at + iw under mask ok. A masked
    load reads the identity (-inf, 0) where the window leaves the input; a pre chain may map
    it to another value, so its result is masked again."""
    pre, v = _pre(region, "row_at + iw", "ok", ctx=_plane_context(region.pre), other=identity)
    return pre, (f"tl.where(ok, {v}, {identity})" if region.pre.body else v)


def _pool_rows(window) -> list:
    """A pooling tile's lines from its output rows r and columns ow: r_in and m (in range),
    o (the flat output index), the row's oh, od and nc (sample x channel), and its window's
    first height h0 and depth d0."""
    _, (sd, sh, _), (pd, ph, _), _ = window.as_3d()
    deep = window.dims == 3
    return ["r_in = r < outer * OD * OH", "m = r_in & (ow < OW)", "o = r * OW + ow", "oh = r % OH",
            *(["od = (r // OH) % OD", "nc = r // (OH * OD)", f"d0 = od * {sd} - {pd}"] if deep
              else ["nc = r // OH"]),
            f"h0 = oh * {sh} - {ph}"]


def _pool_window(window, cols: list) -> list:
    """The window's depth and height loops around `cols` (one window row's W taps, which
    read row_ok, the row's bounds check, and row_at, its first element); a window of up to
    UNROLLED_WINDOW taps unrolled, so that its loads are in flight together."""
    (kd, kh, kw), _, _, (dd, dh, _) = window.as_3d()
    deep = window.dims == 3
    plane = "(nc * D + dz)" if deep else "nc"
    row_ok = "r_in & (ih >= 0) & (ih < H)" + (" & (dz >= 0) & (dz < D)" if deep else "")
    loop = _static_loop if kd * kh * kw <= UNROLLED_WINDOW else _loop
    loops = loop("a", "0", str(kh), "1", [f"ih = h0 + a * {dh}", f"row_ok = {row_ok}",
                                          f"row_at = ({plane} * H + ih) * W", *cols])
    return loop("e", "0", str(kd), "1", [f"dz = d0 + e * {dd}", *loops]) if deep else loops


def _pool(region: Region):
    """A tile of ROWS output rows x BLOCK_W outputs along W per program (ROWS * BLOCK_W =
    BLOCK; BLOCK_W the smaller of BLOCK and W's next power of two), a window of up to
    UNROLLED_WINDOW taps unrolled (a larger one looped); a 3-D window adds a depth loop, a
    1-D or 2-D one is read as a 2-D window over (H, W) (H = 1 for 1-D). Output coordinates
    come from the row index and the column, so no element pays for 64-bit divisions; a
    window row's bounds checks and offset are computed once per tile row, not per element.
    Where W's taps read at offsets that differ modulo a 16-byte vector (stride 1), the W
    offset is a runtime argument Triton does not specialize on, so that every tap's load
    has the same layout instead of each alignment its own with conversions between them
    (on the H200, level1/41's MaxPool1d ran 1.3x faster so, before the chunked form took it
    over; the bounds checks per tile row ran level1/46's AvgPool3d 1.6x faster, both
    in-process). A max, or an avg over the whole window, with such a W window of up to
    W_CHUNKED_TAPS taps reads W in aligned chunks instead (`_pool_chunked`)."""
    window = region.row.window
    (kd, kh, kw), (_, _, sw), (_, _, pw), (_, _, dw) = window.as_3d()
    is_max = region.row.kind == "max"
    name = f"{region.name}_pool"
    identity = 'float("-inf")' if is_max else "0.0"
    pre, v = _pool_tap(region, identity)
    if is_max:  # NaN wins, as in torch
        step = [f"acc = tl.maximum(acc, {v}, propagate_nan=tl.PropagateNan.ALL)"]
    else:
        step = [f"acc += {v}", "cnt += ok.to(tl.float32)"]
    lanes = 16 // FLOAT_BYTES[region.pre.operands[region.anchor].dtype]  # elements per 16-byte load
    mixed = sw == 1 and len({(b * dw - pw) % lanes for b in range(kw)}) > 1
    if mixed and kw <= W_CHUNKED_TAPS and (is_max or window.count_include_pad):
        return _pool_chunked(region)
    w_offset = "+ W_SHIFT" if mixed else f"- {pw}"
    runtime_shift = ("W_SHIFT",) if mixed else ()  # the kernel's parameter, unspecialized
    loop = _static_loop if kd * kh * kw <= UNROLLED_WINDOW else _loop
    cols = loop("b", "0", str(kw), "1", [f"iw = w0 + b * {dw}", "ok = row_ok & ((iw >= 0) & (iw < W))",
                                         *pre, *step])
    body = ["pid = tl.program_id(0)", "nb = tl.cdiv(OW, BLOCK_W)",
            "r = ((pid // nb).to(tl.int64) * ROWS + tl.arange(0, ROWS))[:, None]",
            "ow = ((pid % nb) * BLOCK_W + tl.arange(0, BLOCK_W))[None, :]",
            *_pool_rows(window), f"w0 = ow * {sw} {w_offset}",
            f"acc = tl.full([ROWS, BLOCK_W], {identity}, tl.float32)",
            "cnt = tl.zeros([ROWS, BLOCK_W], dtype=tl.float32)",
            *_pool_window(window, cols)]
    value = "acc" if is_max else (f"acc / {float(kd * kh * kw)!r}" if window.count_include_pad else "acc / cnt")
    body += _store(region, "o", value, "m", _plane_context(region.post))
    launch = ["B = int(self.params['BLOCK'])", "BW = min(B, triton.next_power_of_2(max(OW, 1)))",
              _call(name, region, "triton.cdiv(outer * OD * OH, B // BW) * triton.cdiv(OW, BW)",
                    f"{f'-{pw}, ' if mixed else ''}ROWS=B // BW, BLOCK_W=BW")]
    extra = runtime_shift + ("ROWS: tl.constexpr", "BLOCK_W: tl.constexpr")
    return _kernel(name, region, body, extra, do_not_specialize=runtime_shift), launch


def _w_chunks(kw: int, dw: int, pw: int) -> tuple[int, int, dict]:
    """(shift, chunks, element) of a stride-1 W window of kw taps (dilation dw, padding pw)
    read in W_CHUNK-wide loads: output W_CHUNK * q + j's tap b reads input W_CHUNK * q - shift +
    element[j, b], an index into the concatenation of `chunks` consecutive chunks. `shift`,
    the padding rounded up to a multiple of W_CHUNK, keeps every chunk's start a multiple of
    W_CHUNK, so that each is one aligned load where W is a multiple of W_CHUNK."""
    shift = -(-pw // W_CHUNK) * W_CHUNK
    element = {(j, b): j - pw + b * dw + shift for j in range(W_CHUNK) for b in range(kw)}
    return shift, max(element.values()) // W_CHUNK + 1, element


def _pool_chunked(region: Region):
    """A stride-1 W window whose taps lie at offsets that differ modulo a vector (level1/41's
    MaxPool1d: 8 taps, dilation 3): a program holds ROWS output rows x BLOCK_Q groups of
    W_CHUNK consecutive outputs, and each window row is read as W_CHUNK-wide aligned chunks
    covering every tap of a group, split into single elements in registers; each output of a
    group takes its taps from those elements (one load per W_CHUNK inputs, where the tile form
    loads once per tap and output). On the H200, in-process on level1/41's shape: 1.67-1.82
    ms (0.84-0.91 of its floor) at BLOCK 1024-4096, against the tile form's 2.51-2.74 ms;
    judged at its defaults, 1.56 ms. Level1/46's AvgPool3d (stride 2) was not faster so
    (3.23 ms against 3.15), so strided windows keep the tile form."""
    window = region.row.window
    (kd, kh, kw), _, (_, _, pw), (_, _, dw) = window.as_3d()
    is_max = region.row.kind == "max"
    name = f"{region.name}_pool"
    identity = 'float("-inf")' if is_max else "0.0"
    shift, chunks, element = _w_chunks(kw, dw, pw)
    cols = []
    for c in range(chunks):
        pre, v = _pool_tap(region, identity)
        e = [f"x{c * W_CHUNK + i}" for i in range(W_CHUNK)]
        cols += [f"iw = c0 + {c * W_CHUNK}", "ok = row_ok & ((iw >= 0) & (iw < W))", *pre,
                 f"x_even, x_odd = tl.split(tl.reshape({v}, [ROWS, BLOCK_Q, 2, 2]))",
                 f"{e[0]}, {e[2]} = tl.split(x_even)", f"{e[1]}, {e[3]} = tl.split(x_odd)"]
    for j in range(W_CHUNK):
        for b in range(kw):
            x = f"x{element[j, b]}"
            cols.append(f"acc{j} = tl.maximum(acc{j}, {x}, propagate_nan=tl.PropagateNan.ALL)" if is_max
                        else f"acc{j} += {x}")
    body = ["pid = tl.program_id(0)", f"nb = tl.cdiv(OW, BLOCK_Q * {W_CHUNK})",
            "r = ((pid // nb).to(tl.int64) * ROWS + tl.arange(0, ROWS))[:, None, None]",
            "q = ((pid % nb) * BLOCK_Q + tl.arange(0, BLOCK_Q))[None, :, None]",
            f"lane = tl.arange(0, {W_CHUNK})[None, None, :]", f"ow = q * {W_CHUNK} + lane",
            *_pool_rows(window), f"c0 = q * {W_CHUNK} - {shift} + lane",
            *[f"acc{j} = tl.full([ROWS, BLOCK_Q], {identity}, tl.float32)" for j in range(W_CHUNK)],
            *_pool_window(window, cols)]
    scale = "" if is_max else f" / {float(kd * kh * kw)!r}"
    body.append(f"res = tl.reshape(tl.join(tl.join(acc0, acc2), tl.join(acc1, acc3)), [ROWS, BLOCK_Q, {W_CHUNK}]){scale}")
    body += _store(region, "o", "res", "m", _plane_context(region.post))
    launch = ["B = int(self.params['BLOCK'])",
              f"BQ = min(max(B // {W_CHUNK}, 1), triton.next_power_of_2(max(triton.cdiv(OW, {W_CHUNK}), 1)))",
              f"R = max(1, B // {W_CHUNK} // BQ)",
              _call(name, region, f"triton.cdiv(outer * OD * OH, R) * triton.cdiv(OW, BQ * {W_CHUNK})",
                    "ROWS=R, BLOCK_Q=BQ")]
    return _kernel(name, region, body, ("ROWS: tl.constexpr", "BLOCK_Q: tl.constexpr")), launch


def _loss(region: Region):
    """Cross entropy: one program per row of L classes, the row's logsumexp taken online
    in BLOCK chunks (the pre chain on each element) less the pre value at the row's class;
    0 where the class is ignore_index, NaN where it is outside the row. "none" writes each
    row's loss; "sum"/"mean" write them to a buffer that one program then sums (a mean
    over the rows not ignored)."""
    row = region.row
    rname, tname = f"{region.name}_ce_rows", f"{region.name}_ce_total"
    pre, v = _pre(region, "base + l", "msk")
    at_class, picked = _pre(region, "base + cls", "inb")
    body = ["o = tl.program_id(0).to(tl.int64)", "base = o * L",
            "m = tl.full([BLOCK], float('-inf'), tl.float32)", "acc = tl.zeros([BLOCK], tl.float32)"]
    body += _loop("l0", "0", "L", "BLOCK", ["l = l0 + tl.arange(0, BLOCK)", "msk = l < L", *pre,
                                            f"vv = tl.where(msk, {v}, float('-inf'))", "mn = tl.maximum(m, vv)",
                                            "safe = tl.where(mn == float('-inf'), 0.0, mn)",
                                            "acc = acc * tl.exp(m - safe) + tl.exp(vv - safe)", "m = mn"])
    body += ["mm = tl.max(m, axis=0)", "safe = tl.where(mm == float('-inf'), 0.0, mm)",
             "lse = mm + tl.log(tl.sum(acc * tl.exp(m - safe), axis=0))",
             "cls = tl.load(ix + o)", "inb = (cls >= 0) & (cls < L)", *at_class,
             f"loss = tl.where(cls == {row.ignore_index}, 0.0, tl.where(inb, lse - {picked}, float('nan')))"]
    launch = ["B = int(self.params['BLOCK'])"]
    if row.reduction == "none":
        return _kernel(rname, region, body + _store(region, "o", "loss", "")), launch + [_call(rname, region, "outer")]
    total = ["acc = tl.zeros([BLOCK], tl.float32)", "cnt = tl.zeros([BLOCK], tl.float32)"]
    total += _loop("r0", "0", "outer", "BLOCK", [
        "r = r0 + tl.arange(0, BLOCK)", "msk = r < outer", "acc += tl.load(part + r, mask=msk, other=0.0)",
        f"cnt += tl.where(msk & (tl.load(ix + r, mask=msk, other=0) != {row.ignore_index}), 1.0, 0.0)"])
    total += ["res = tl.sum(acc, axis=0)" + (" / tl.sum(cnt, axis=0)" if row.reduction == "mean" else ""),
              *_store(region, "0", "res", "")]
    src = _kernel(rname, region, body + ["tl.store(part + o, loss)"], ("part",)) + "\n\n" + \
        _kernel(tname, region, total, ("part",))
    launch += ["part = torch.empty(outer, dtype=torch.float32, device=out.device)",
               _call(rname, region, "outer", "part"), _call(tname, region, "1", "part")]
    return src, launch
