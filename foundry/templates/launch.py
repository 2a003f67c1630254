"""The Python side of a region's kernel launch, shared by every backend: how the
generated forward computes sizes (R, K, M per operand, outer/L/inner) from the anchor
input's runtime shape, and the output's shape and dtype."""

from __future__ import annotations

from foundry.templates.ir import Region

TORCH_DTYPE = {"float32": "torch.float32", "bfloat16": "torch.bfloat16", "float16": "torch.float16",
               "int64": "torch.int64"}


def phase_ints(region: Region) -> list[str]:
    """The integer arguments of a region's kernel, in order."""
    ints = ["Rp", "Kp"] + [f"Mp{k}" for k, o in enumerate(region.pre.operands)
                           if o.layout in ("row", "rowcol")]
    if region.row is not None:
        ints += ["outer", "L", "inner"]
        if region.row.kind == "group":
            ints += ["G", "Cg", "HW"]
        if region.row.kind == "instance":
            ints += ["C"]
        if region.row.family == "pool":  # as a 3-D window: a 1-D or 2-D one has D = OD = 1 (and H = OH = 1)
            ints += ["D", "H", "W", "OD", "OH", "OW"]
    if region.post is not None:
        ints += ["Kq"] + [f"Mq{k}" for k, o in enumerate(region.post.operands)
                          if o.layout in ("row", "rowcol")]
    return ints


def size_lines(region: Region, args: list[str]) -> list[str]:
    """Python lines (for the launcher's __call__) computing every name in phase_ints
    plus `out_shape`, from the argument variables `args`."""
    pre = region.pre
    lines = [f"S = tuple({args[region.anchor]}.shape)",
             f"Rp = _prod(S[:{pre.split}])", f"Kp = _prod(S[{pre.split}:])"]
    for k, o in enumerate(pre.operands):
        if o.layout in ("row", "rowcol"):
            lines.append(f"Mp{k} = _prod(S[{o.row_from}:{pre.split}])")
    row = region.row
    if row is None:
        lines.append("out_shape = S")
    else:
        a, b = row.dim_start, row.dim_end
        lines += [f"outer = _prod(S[:{a}])", f"L = _prod(S[{a}:{b}])", f"inner = _prod(S[{b}:])"]
        if row.kind == "group":
            # G: the launcher's group count, given when the candidate is built (launcher_init)
            lines += ["G = self.groups", "Cg = S[1] // G", "HW = _prod(S[2:])", "outer = S[0] * G", "L = Cg * HW"]
        if row.kind == "instance":
            lines += ["C = S[1]"]
        if row.family == "loss":
            lines.append("out_shape = S[:1]" if row.reduction == "none" else "out_shape = ()")
        elif row.family == "pool":
            missing = 3 - row.window.dims
            lines.append("D, H, W = " + (f"(1,) * {missing} + " if missing else "") + "S[2:]")
            for size, (k, s, p, d) in zip("DHW", zip(*row.window.as_3d())):
                grow = 2 * p - d * (k - 1) - 1  # what padding adds less what the window's reach takes
                lines.append(f"O{size} = ({size} {'-' if grow < 0 else '+'} {abs(grow)}) // {s} + 1")
            lines.append(f"out_shape = S[:2] + (OD, OH, OW)[{missing}:]")
        elif row.reduces:
            if row.keepdim:
                lines.append(f"out_shape = S[:{a}] + (1,) * {b - a} + S[{b}:]")
            else:
                lines.append(f"out_shape = S[:{a}] + S[{b}:]")
        else:
            lines.append("out_shape = S")
    post = region.post
    if post is not None:
        lines.append(f"Kq = _prod(out_shape[{post.split}:])")
        for k, o in enumerate(post.operands):
            if o.layout in ("row", "rowcol"):
                lines.append(f"Mq{k} = _prod(out_shape[{o.row_from}:{post.split}])")
    return lines
