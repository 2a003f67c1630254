"""TemplateProposer: the offline mutation operator (no LLM).

translate -> a first template candidate for the request's backend (island i takes the
i-th of the templates that apply, in the order `engine.variants` gives, fastest first);
optimize -> one mutation of the parent (a TUNABLE value, the template choice, or a fusion
boundary); repair -> another template or another parameter point than the failed
parent's. A task no template covers gets a candidate with empty source and the note "no
template applies; needs an LLM (...)".
"""

from __future__ import annotations

import random

from foundry.templates.backend_c import why_not_c
from foundry.templates.config import TemplateConfig
from foundry.templates.engine import BACKENDS, coverage, describe_task, emit, variants
from foundry.templates.mutate import TemplateState, mutate, read_state, split_epilogues
from foundry.tuning.space import SpaceError, points, read_tunable
from foundry.types import Candidate, ProposalRequest, Proposer


class TemplateProposer(Proposer):
    def __init__(self, *, config: TemplateConfig | None = None):
        self.config = config or TemplateConfig()

    async def propose(self, request: ProposalRequest) -> Candidate:
        return self.propose_sync(request)

    def propose_sync(self, request: ProposalRequest) -> Candidate:
        task = request.task
        why = self._why_not(request)
        if why:
            return self._empty(request, why)
        parent = request.parent
        state = read_state(parent.source) if parent is not None else None
        if state is not None and state.backend != request.backend:
            state = None
        rng = random.Random(f"{request.seed}:{request.island_id}:{request.generation}:{request.mode}:"
                            f"{parent.candidate_id if parent else ''}")
        if request.mode == "translate" or parent is None or state is None:
            # islands start from different templates, island 0 from the one expected fastest
            vs = variants(task, request.backend)
            st = TemplateState(backend=request.backend, variant=vs[request.island_id % len(vs)])
            return self._candidate(request, st, {}, f"first template ({st.variant})")
        desc = describe_task(task)
        vs = variants(task, request.backend)
        tunable = _tunable(parent.source)
        params = dict(parent.params or {})
        if request.mode == "repair":
            others = [v for v in vs if v != state.variant]
            if others and "template" in self.config.mutations:
                st = TemplateState(backend=request.backend, variant=rng.choice(others))
                return self._candidate(request, st, {}, f"repair: template {state.variant} -> {st.variant}")
            if state.unfused:
                st = TemplateState(backend=request.backend, variant=state.variant)
                return self._candidate(request, st, params, "repair: fuse every epilogue again")
            pts = list(points(tunable, limit=8, exhaustive_max=8, seed=rng.randrange(1 << 30)))
            pts = [p for p in pts if p != {**{k: v[0] for k, v in tunable.items()}, **params}] or pts
            return self._candidate(request, state, rng.choice(pts) if pts else {}, "repair: other parameters")
        view = split_epilogues(desc, state.unfused)
        m = mutate(state=state, params=params, tunable=tunable, desc=view if state.variant == "fused" else desc,
                   variants=vs, allowed=self.config.mutations, rng=rng)
        return self._candidate(request, m.state, m.params, m.what)

    def _why_not(self, request: ProposalRequest) -> str | None:
        if not self.config.enabled:
            return "the template engine is disabled (templates.enabled=false); needs an LLM"
        if request.backend not in BACKENDS:
            return f"no template for backend {request.backend!r}; needs an LLM"
        why = coverage(request.task)
        if why:
            return why
        desc = describe_task(request.task)
        why_c = why_not_c(desc) if request.backend == "c" else None
        if why_c:
            return f"no template applies; needs an LLM ({why_c})"
        fams = set(desc.families)
        off = sorted(fams - set(self.config.families))
        if off:
            return f"no template applies; needs an LLM (families disabled in templates.families: {', '.join(off)})"
        return None

    def _candidate(self, request: ProposalRequest, state: TemplateState, params: dict, what: str) -> Candidate:
        try:
            src = emit(request.task, backend=request.backend, variant=state.variant, unfused=state.unfused,
                       params=params)
        except Exception as e:  # noqa: BLE001 - an emitter gap is reported, not raised
            return self._empty(request, f"template emission failed ({type(e).__name__}: {e}); needs an LLM")
        tun = _tunable(src)
        params = {k: v for k, v in params.items() if k in tun and v in tun[k]}
        parents = (request.parent.candidate_id,) if request.parent is not None else ()
        return Candidate.make(task_id=request.task.task_id, source=src, backend=request.backend, params=params,
                              parent_ids=parents, island_id=request.island_id, generation=request.generation,
                              strategy_id=f"template:{state.variant}", origin="template", note=what)

    def _empty(self, request: ProposalRequest, why: str) -> Candidate:
        parents = (request.parent.candidate_id,) if request.parent is not None else ()
        return Candidate.make(task_id=request.task.task_id, source="", backend=request.backend, parent_ids=parents,
                              island_id=request.island_id, generation=request.generation,
                              strategy_id="template:none", origin="template", note=why)


def _tunable(source: str) -> dict:
    try:
        return read_tunable(source)
    except SpaceError:
        return {}
