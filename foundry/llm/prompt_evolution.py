"""Prompt evolution: a population of prompts co-evolving with the kernels.

A prompt is a set of sections (philosophy, strategies, pitfalls, analysis). The
population starts from the built-in variants (files under prompts/variants/). Islands
`report` each child's outcome under the prompt that produced it; `select` picks the next
prompt by UCB or by softmax with a usage bonus. Every `edit_every` reports, `evolve`
asks the LLM to rewrite one section of a selected prompt under one of five strategies
(improve, specialise, generalise, simplify, elaborate); a child identical to a known
prompt (by content hash) is dropped. Without an LLM client, `evolve` edits nothing and
selection still ranks the built-in variants.

Pure logic, no Ray: the runtime's PromptEvolverActor wraps one `PromptPopulation`.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field

from foundry.llm import templates as T
from foundry.llm.budget import BudgetExhausted
from foundry.llm.evolution_config import PromptEvolutionConfig
from foundry.llm.prompt_edit import edit_messages, parse_section_reply
from foundry.types import content_hash


@dataclass(frozen=True)
class PromptVariant:
    prompt_id: str
    sections: dict
    name: str = ""
    origin: str = "builtin"  # "builtin" | "llm_edit"
    parent_id: str = ""
    edit_strategy: str = ""
    edited_section: str = ""

    @staticmethod
    def make(sections: dict, **kwargs) -> "PromptVariant":
        sections = {str(k): str(v).strip() for k, v in sections.items()}
        pid = "p" + content_hash(json.dumps(sections, sort_keys=True))
        return PromptVariant(prompt_id=pid, sections=sections, **kwargs)


@dataclass
class PromptRecord:
    """Outcomes of one prompt, aggregated over all islands."""

    selected: int = 0
    reports: int = 0
    improved: int = 0
    correct: int = 0
    reward_sum: float = 0.0
    delta_sum: float = 0.0
    by_island: dict = field(default_factory=dict)  # island id -> reports


@dataclass(frozen=True)
class PromptStats:
    prompt_id: str
    name: str
    origin: str
    active: bool
    selected: int
    reports: int
    improved: int
    correct: int
    mean_reward: float
    mean_fitness_delta: float
    islands: int


@dataclass(frozen=True)
class EditOutcome:
    """What one evolution step did: status accepted | duplicate | invalid | failed |
    skipped (no LLM) | budget (an LLM budget is spent)."""

    status: str
    parent_id: str = ""
    prompt_id: str = ""
    section: str = ""
    strategy: str = ""
    detail: str = ""


def builtin_variants(names: tuple = ()) -> list[PromptVariant]:
    names = tuple(names) or tuple(T.variant_names())
    return [PromptVariant.make(dict(T.sections(f"variants/{n}.md")), name=n) for n in names]


class PromptPopulation:
    """The prompt population and every prompt's record (see the module docstring)."""

    def __init__(self, config: PromptEvolutionConfig | None = None, *,
                 variants: list[PromptVariant] | None = None):
        self.config = config or PromptEvolutionConfig()
        self._variants: dict[str, PromptVariant] = {}
        self._records: dict[str, PromptRecord] = {}
        self._retired: set[str] = set()
        self._seen: set[str] = set()  # every prompt id ever in the population
        self.reports_since_edit = 0
        self.unknown_reports = 0
        self.edits: list[EditOutcome] = []
        for v in variants if variants is not None else builtin_variants(self.config.builtin_variants):
            self._add(v)
        if not self._variants:
            raise ValueError("the prompt population needs at least one variant")

    # -- population --------------------------------------------------------------------

    def _add(self, v: PromptVariant) -> bool:
        if v.prompt_id in self._seen:
            return False
        self._seen.add(v.prompt_id)
        self._variants[v.prompt_id] = v
        self._records[v.prompt_id] = PromptRecord()
        return True

    @property
    def active(self) -> list[PromptVariant]:
        return [v for pid, v in self._variants.items() if pid not in self._retired]

    def variant(self, prompt_id: str) -> PromptVariant:
        try:
            return self._variants[prompt_id]
        except KeyError:
            raise KeyError(f"unknown prompt id {prompt_id!r}") from None

    def _mean(self, rec: PromptRecord) -> float:
        c = self.config
        return (rec.reward_sum + c.prior_reward) / (rec.reports + 1)

    # -- selection ---------------------------------------------------------------------

    def select(self, rng: random.Random) -> PromptVariant:
        """The prompt for the next proposal (UCB or softmax, per config)."""
        pool = self.active
        recs = [self._records[v.prompt_id] for v in pool]
        if self.config.selection == "ucb":
            untried = [v for v, r in zip(pool, recs) if r.selected == 0]
            if untried:
                choice = rng.choice(untried)
            else:
                total = sum(r.selected for r in recs)
                scores = [self._mean(r) + self.config.ucb_c * math.sqrt(math.log(total) / r.selected)
                          for r in recs]
                best = max(scores)
                choice = rng.choice([v for v, s in zip(pool, scores) if s >= best - 1e-12])
        else:
            scores = [self._mean(r) + self.config.usage_bonus / math.sqrt(1 + r.selected)
                      for r in recs]
            top = max(scores)
            weights = [math.exp((s - top) / self.config.temperature) for s in scores]
            choice = rng.choices(pool, weights=weights)[0]
        self._records[choice.prompt_id].selected += 1
        return choice

    def report(self, *, prompt_id: str, island_id: int, improved: bool, fitness_delta: float,
               correct: bool) -> bool:
        """Record one child's outcome; False (and counted) for an unknown prompt id."""
        rec = self._records.get(prompt_id)
        if rec is None:
            self.unknown_reports += 1
            return False
        c = self.config
        rec.reports += 1
        rec.improved += int(bool(improved))
        rec.correct += int(bool(correct))
        rec.reward_sum += c.reward_improved if improved else (c.reward_correct if correct else 0.0)
        delta = float(fitness_delta)
        rec.delta_sum += delta if math.isfinite(delta) else 0.0
        rec.by_island[int(island_id)] = rec.by_island.get(int(island_id), 0) + 1
        self.reports_since_edit += 1
        return True

    @property
    def edit_due(self) -> bool:
        n = self.config.edit_every
        return n > 0 and self.reports_since_edit >= n

    # -- evolution ---------------------------------------------------------------------

    async def evolve(self, *, client, rng: random.Random, parent_id: str | None = None,
                     section: str | None = None, strategy: str | None = None,
                     context: str = "") -> EditOutcome:
        """One edit step: the LLM rewrites one section of a prompt. `client` is an
        `LLMClient` or None (no LLM: nothing is edited). The parent (default: picked as
        `select` would), the section and the strategy (default: uniform) may be given;
        `context` (e.g. "backend triton; tasks: level 2 fusions") is shown to the LLM."""
        self.reports_since_edit = 0
        if client is None:
            return self._log(EditOutcome("skipped", detail="no LLM configured"))
        if parent_id is None:
            parent = self.select(rng)
            self._records[parent.prompt_id].selected -= 1  # picking a parent is not a use
        else:
            parent = self.variant(parent_id)
        section = section or rng.choice(sorted(parent.sections))
        strategy = strategy or rng.choice(list(self.config.edit_strategies))
        base = dict(parent_id=parent.prompt_id, section=section, strategy=strategy)
        messages = edit_messages(parent.sections, section=section, strategy=strategy,
                                 record=self.stats_for(parent.prompt_id),
                                 max_chars=self.config.max_section_chars, context=context)
        try:
            reply = await client.complete(messages, purpose="prompt_edit", rng=rng,
                                          prompt_id=parent.prompt_id)
        except BudgetExhausted as e:
            return self._log(EditOutcome("budget", detail=str(e), **base))
        if not reply.ok:
            return self._log(EditOutcome("failed", detail=f"{reply.outcome}: {reply.error}", **base))
        text, why = parse_section_reply(reply.text, old=parent.sections[section],
                                        max_chars=self.config.max_section_chars,
                                        secrets=getattr(client, "secrets", ()))
        if text is None:
            return self._log(EditOutcome("invalid", detail=why, **base))
        child = PromptVariant.make({**parent.sections, section: text}, origin="llm_edit",
                                   name=f"{parent.name or parent.prompt_id}+{strategy}:{section}",
                                   parent_id=parent.prompt_id, edit_strategy=strategy,
                                   edited_section=section)
        if not self._add(child):
            return self._log(EditOutcome("duplicate", prompt_id=child.prompt_id,
                                         detail="same content as a known prompt", **base))
        self._retire_excess(keep=child.prompt_id)
        return self._log(EditOutcome("accepted", prompt_id=child.prompt_id, **base))

    def _retire_excess(self, *, keep: str) -> None:
        while len(self.active) > self.config.max_population:
            eligible = [v.prompt_id for v in self.active if v.prompt_id != keep and
                        self._records[v.prompt_id].reports >= self.config.min_uses_to_retire]
            if not eligible:
                return
            worst = min(eligible, key=lambda pid: self._mean(self._records[pid]))
            self._retired.add(worst)

    def _log(self, outcome: EditOutcome) -> EditOutcome:
        self.edits.append(outcome)
        return outcome

    # -- reporting and state -----------------------------------------------------------

    def stats_for(self, prompt_id: str) -> PromptStats:
        v, r = self._variants[prompt_id], self._records[prompt_id]
        return PromptStats(prompt_id=prompt_id, name=v.name, origin=v.origin,
                           active=prompt_id not in self._retired, selected=r.selected,
                           reports=r.reports, improved=r.improved, correct=r.correct,
                           mean_reward=self._mean(r),
                           mean_fitness_delta=r.delta_sum / r.reports if r.reports else 0.0,
                           islands=len(r.by_island))

    def stats(self) -> list[PromptStats]:
        """Every prompt's record, best mean reward first."""
        return sorted((self.stats_for(pid) for pid in self._variants),
                      key=lambda s: (-s.mean_reward, s.prompt_id))

    def to_state(self) -> dict:
        """Plain values, for a checkpoint (`from_state` restores it)."""
        return {
            "variants": [v.__dict__ for v in self._variants.values()],
            "records": {pid: {**r.__dict__, "by_island": {str(k): n for k, n in r.by_island.items()}}
                        for pid, r in self._records.items()},
            "retired": sorted(self._retired),
            "reports_since_edit": self.reports_since_edit,
            "unknown_reports": self.unknown_reports,
            "edits": [e.__dict__ for e in self.edits],
        }

    @classmethod
    def from_state(cls, state: dict, config: PromptEvolutionConfig | None = None) -> "PromptPopulation":
        pop = cls(config, variants=[PromptVariant(**v) for v in state["variants"]])
        for pid, r in state["records"].items():
            rec = PromptRecord(**{**r, "by_island": {int(k): n for k, n in r["by_island"].items()}})
            pop._records[pid] = rec
        pop._retired = set(state["retired"])
        pop.reports_since_edit = state["reports_since_edit"]
        pop.unknown_reports = state["unknown_reports"]
        pop.edits = [EditOutcome(**e) for e in state["edits"]]
        return pop
