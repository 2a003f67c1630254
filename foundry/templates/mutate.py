"""Mutations the islands apply without an LLM, and the template state a candidate carries.

A template candidate's source starts with a marker line,
``# foundry-template: {"backend": "c", "variant": "fused", "unfused": [0]}``,
so any later proposer (or a migrant's new island) can read which template produced it.
Mutations: `params` (one TUNABLE value: block sizes, warps, pipeline stages, SIMD width,
column block / loop order, schedule, split count), `template` (another template for the
same task, e.g. Triton matmul-with-epilogue vs torch matmul + fused Triton chain) and
`fusion` (move a fusion boundary: run a region's epilogue as its own kernel, or fuse it
back).
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
from dataclasses import dataclass

from foundry.templates.ir import Description, Operand, Phase, Ref, Region

MARKER = "# foundry-template: "
_MARKER_RE = re.compile(r"^# foundry-template: (\{.*\})\s*$", re.M)


@dataclass(frozen=True)
class TemplateState:
    backend: str
    variant: str = "fused"
    unfused: tuple = ()  # indices of regions whose epilogue runs as a separate kernel

    def marker(self) -> str:
        return MARKER + json.dumps({"backend": self.backend, "variant": self.variant,
                                    "unfused": list(self.unfused)}, sort_keys=True)


def read_state(source: str) -> TemplateState | None:
    m = _MARKER_RE.search(source or "")
    if not m:
        return None
    try:
        d = json.loads(m.group(1))
        return TemplateState(backend=str(d["backend"]), variant=str(d.get("variant", "fused")),
                             unfused=tuple(int(i) for i in d.get("unfused", ())))
    except (ValueError, KeyError, TypeError):
        return None


def splittable(desc: Description) -> tuple:
    """Regions whose epilogue (post phase) can run as a separate kernel."""
    return tuple(i for i, r in enumerate(desc.regions) if r.row is not None and r.post is not None)


def split_epilogues(desc: Description, which: tuple) -> Description:
    """Move the fusion boundary: each region in `which` loses its post phase, which
    becomes its own pointwise region `<name>_post` reading the row op's output."""
    if not which:
        return desc
    regions, src = [], desc.forward_src
    for i, r in enumerate(desc.regions):
        if i not in which or r.post is None:
            regions.append(r)
            continue
        head = dataclasses.replace(r, post=None, out_dtype=r.row.out_dtype)
        post = r.post
        ops = (Operand(name=f"{r.name}_out", row_from=0, col=True),) + post.operands

        def shift(ref: Ref) -> Ref:
            if ref.kind == "row":
                return Ref("in", 0)
            if ref.kind == "in":
                return Ref("in", ref.index + 1)
            return ref

        body = tuple(dataclasses.replace(ins, args=tuple(shift(a) for a in ins.args)) for ins in post.body)
        phase = Phase(rank=post.rank, split=post.split, operands=ops, body=body, result=shift(post.result))
        tail = Region(name=f"{r.name}_post", pre=phase, row=None, post=None, anchor=0,
                      out_rank=r.out_rank, out_dtype=r.out_dtype)
        regions += [head, tail]
        n_pre, n_post = len(r.pre.operands), len(post.operands)
        pattern = re.compile(rf"self\.{re.escape(r.name)}\(([^()]*)\)")
        m = pattern.search(src)
        if m is None:
            raise ValueError(f"region {r.name} is not called in the forward")
        args = [a.strip() for a in m.group(1).split(",") if a.strip()]
        pre_args, post_args, rest = args[:n_pre], args[n_pre:n_pre + n_post], args[n_pre + n_post:]
        inner = f"self.{r.name}({', '.join(pre_args + rest)})"
        src = src[:m.start()] + f"self.{r.name}_post({', '.join([inner] + post_args)})" + src[m.end():]
    return dataclasses.replace(desc, regions=tuple(regions), forward_src=src,
                               linear_epilogue=None, linear_region=None, linear_forward=None, linear_out=())


@dataclass(frozen=True)
class Mutation:
    state: TemplateState
    params: dict
    what: str  # a short description, e.g. "params: BLOCK 4096 -> 1024"


def mutate(*, state: TemplateState, params: dict, tunable: dict, desc: Description, variants: tuple,
           allowed: tuple, rng: random.Random) -> Mutation:
    """One random mutation among those `allowed` that can change something."""
    options = []
    if "params" in allowed and any(len(v) > 1 for v in tunable.values()):
        options.append("params")
    if "template" in allowed and len([v for v in variants if v != state.variant]) > 0:
        options.append("template")
    if "fusion" in allowed and state.variant == "fused" and splittable(desc):
        options.append("fusion")
    if not options:
        return Mutation(state, dict(params), "no mutation applies")
    kind = rng.choice(options)
    if kind == "params":
        name = rng.choice(sorted(k for k, v in tunable.items() if len(v) > 1))
        cur = params.get(name, tunable[name][0])
        new = rng.choice([v for v in tunable[name] if v != cur])
        return Mutation(state, {**params, name: new}, f"params: {name} {cur} -> {new}")
    if kind == "template":
        new = rng.choice([v for v in variants if v != state.variant])
        return Mutation(dataclasses.replace(state, variant=new, unfused=()), {}, f"template: {state.variant} -> {new}")
    k = rng.choice(splittable(desc))
    unfused = tuple(sorted(set(state.unfused) ^ {k}))
    what = f"fusion: {'split' if k in unfused else 'fuse'} the epilogue of region {k}"
    return Mutation(dataclasses.replace(state, unfused=unfused), dict(params), what)
