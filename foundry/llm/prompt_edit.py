"""The LLM request that edits one prompt section, and the parsing of its reply."""

from __future__ import annotations

from typing import Iterable, Mapping

from foundry.llm import templates as T
from foundry.llm.accounting import redact
from foundry.llm.parsing import fenced_blocks, strip_reasoning


def _record_text(record) -> str:
    if record is None or record.reports == 0:
        return "No outcomes reported yet."
    return (f"- children reported: {record.reports} (from {record.islands} island(s))\n"
            f"- improved on their parent: {record.improved}\n"
            f"- correct: {record.correct}\n"
            f"- mean fitness change vs parent: {record.mean_fitness_delta:+.3f}")


def edit_messages(sections: Mapping[str, str], *, section: str, strategy: str, record,
                  max_chars: int, context: str = "") -> list[dict]:
    """[system, user] messages asking for a new version of `section`."""
    strategies = T.keyed("edit/strategies.md")
    if strategy not in strategies:
        raise ValueError(f"unknown edit strategy {strategy!r} (allowed: {', '.join(strategies)})")
    if section not in sections:
        raise ValueError(f"the prompt has no section {section!r} (it has: {', '.join(sections)})")
    whole = "\n\n".join(f"### {name}\n{text}" for name, text in sections.items())
    user = T.render(T.read("edit/user.md"), {
        "all_sections": whole, "record": _record_text(record), "section": section,
        "strategy": strategy, "strategy_text": strategies[strategy],
        "current": sections[section].strip(), "max_chars": max_chars,
        "context": f"Context of the search: {context.strip()}" if context.strip() else "",
    })
    return [{"role": "system", "content": T.render(T.read("edit/system.md"), {})},
            {"role": "user", "content": user}]


def parse_section_reply(text: str, *, old: str, max_chars: int,
                        secrets: Iterable[str] = ()) -> tuple[str | None, str]:
    """(new section text, "") or (None, why it was rejected)."""
    if not text or not text.strip():
        return None, "empty reply"
    text = strip_reasoning(text)
    blocks = fenced_blocks(text)
    preferred = [b for lang, b in blocks if lang in ("text", "markdown", "md", "")]
    body = (preferred or [b for _, b in blocks] or [text])[-1]
    body = redact(body.strip(), tuple(secrets))
    lines = body.splitlines()
    if lines and lines[0].lstrip().startswith("#"):  # a heading the model added
        body = "\n".join(lines[1:]).strip()
    if not body:
        return None, "the reply holds no section text"
    if len(body) > max_chars:
        return None, f"the new section has {len(body)} characters (limit {max_chars})"
    if body == old.strip():
        return None, "the new section is identical to the old one"
    return body, ""
