"""Turn a model's reply into a candidate source file.

A reply may carry a full file in a fenced code block, or SEARCH/REPLACE edits against
the parent::

    <<<<<<< SEARCH
    old lines
    =======
    new lines
    >>>>>>> REPLACE

Edits are matched tolerantly (exact text, then line by line ignoring trailing
whitespace, then ignoring indentation, re-indenting the replacement). If an edit does
not apply and the reply also carries a full file, the full file is used. A reply with no
usable code gives `ParsedReply(source="", kind="none", note=<the reason>)`; parsing
never raises.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)
_EDIT = re.compile(
    r"^[ \t]*<{5,9}[ \t]*SEARCH[ \t]*\n(.*?)^[ \t]*={5,9}[ \t]*\n(.*?)^[ \t]*>{5,9}[ \t]*REPLACE[ \t]*$",
    re.S | re.M)
_FENCE_OPEN = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([A-Za-z0-9_+.-]*)[^\n]*\n", re.M)
_CODE_LANGS = ("", "python", "py", "python3")


@dataclass(frozen=True)
class ParsedReply:
    source: str  # "" when the reply has no usable code
    kind: str  # "full" | "diff" | "none"
    note: str = ""  # why there is no code, or what was done (fallbacks, fuzzy matches)


@dataclass(frozen=True)
class _Edit:
    search: str
    replace: str


def strip_reasoning(text: str) -> str:
    """Drop `<think>...</think>` blocks (and an unclosed leading one) that reasoning
    models put before their answer."""
    text = _THINK.sub("", text)
    low = text.lower()
    if "<think>" in low and "</think>" not in low:
        head = low.index("<think>")
        fence = text.find("```", head)
        text = text[:head] + (text[fence:] if fence >= 0 else "")
    return text


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced block; an unclosed last fence (a truncated
    reply) runs to the end of the text."""
    blocks = []
    pos = 0
    while True:
        m = _FENCE_OPEN.search(text, pos)
        if not m:
            break
        fence, lang = m.group(1), m.group(2).lower()
        close = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.M)
        end = close.search(text, m.end())
        body = text[m.end(): end.start() if end else len(text)]
        blocks.append((lang, body))
        if not end:
            break
        pos = end.end()
    return blocks


def _full_file(text: str) -> tuple[str | None, str]:
    blocks = [(lang, b) for lang, b in fenced_blocks(text) if not _EDIT.search(b)]
    with_model = [b for lang, b in blocks if "class ModelNew" in b]
    if with_model:
        return with_model[-1].strip("\n") + "\n", ""
    if "class ModelNew" in text and not blocks:  # raw code with no fence
        try:
            ast.parse(text)
            return text.strip("\n") + "\n", ""
        except SyntaxError:
            return None, "the reply mentions ModelNew but holds no fenced code block"
    if blocks:
        return None, "no fenced code block defines class ModelNew"
    return None, "the reply holds no code block"


def _lines(s: str) -> list[str]:
    return s.split("\n")


def _find_lines(hay: list[str], needle: list[str], key) -> int:
    n = len(needle)
    want = [key(x) for x in needle]
    for i in range(len(hay) - n + 1):
        if all(key(hay[i + j]) == want[j] for j in range(n)):
            return i
    return -1


def _indent(s: str) -> str:
    return s[: len(s) - len(s.lstrip())]


def apply_edit(source: str, edit: _Edit) -> tuple[str | None, str]:
    """Apply one edit; returns (new source or None, how it matched)."""
    search, replace = edit.search, edit.replace
    if not search.strip():
        return source.rstrip("\n") + "\n" + replace, "appended"
    if search in source:
        return source.replace(search, replace, 1), "exact"
    s_search = search.strip("\n")
    hay = _lines(source)
    needle = _lines(s_search)
    rep = _lines(replace.strip("\n"))
    i = _find_lines(hay, needle, lambda x: x.rstrip())
    if i >= 0:
        return "\n".join(hay[:i] + rep + hay[i + len(needle):]), "trailing-whitespace"
    i = _find_lines(hay, needle, lambda x: x.strip())
    if i >= 0:
        first = next((k for k, x in enumerate(needle) if x.strip()), 0)
        have, want = _indent(hay[i + first]), _indent(needle[first])
        fixed = []
        for line in rep:
            if line.startswith(want):
                line = have + line[len(want):]
            elif line.strip():
                line = have + line.lstrip()
            fixed.append(line)
        return "\n".join(hay[:i] + fixed + hay[i + len(needle):]), "indentation"
    needle_nb = [x for x in needle if x.strip()]
    idx = [k for k, x in enumerate(hay) if x.strip()]
    hay_nb = [hay[k] for k in idx]
    j = _find_lines(hay_nb, needle_nb, lambda x: x.strip()) if needle_nb else -1
    if j >= 0:
        lo, hi = idx[j], idx[j + len(needle_nb) - 1] + 1
        return "\n".join(hay[:lo] + rep + hay[hi:]), "blank-lines"
    return None, "not found"


def parse_edits(text: str) -> list[_Edit]:
    return [_Edit(m.group(1), m.group(2)) for m in _EDIT.finditer(text)]


def parse_reply(text: str | None, *, parent_source: str | None = None,
                max_source_chars: int = 200_000) -> ParsedReply:
    """Extract the candidate file from a reply (see the module docstring)."""
    if not text or not text.strip():
        return ParsedReply("", "none", "empty reply")
    text = strip_reasoning(text.replace("\r\n", "\n"))
    edits = parse_edits(text)
    full, why_no_full = _full_file(text)
    result: ParsedReply
    if edits and parent_source:
        source, matches, failed = parent_source, [], []
        for k, edit in enumerate(edits, 1):
            new, how = apply_edit(source, edit)
            if new is None:
                failed.append(k)
            else:
                source = new
                matches.append(how)
        if not failed:
            fuzzy = sum(1 for m in matches if m != "exact")
            result = ParsedReply(source if source.endswith("\n") else source + "\n", "diff",
                                 f"{len(edits)} edit(s) applied" + (f", {fuzzy} matched loosely" if fuzzy else ""))
        elif full is not None:
            result = ParsedReply(full, "full", f"edit(s) {failed} did not match the parent; used the full file")
        else:
            return ParsedReply("", "none", f"SEARCH block(s) {failed} of {len(edits)} not found in the parent")
    elif edits and full is None:
        return ParsedReply("", "none", "the reply holds SEARCH/REPLACE edits but there is no parent to apply them to")
    elif full is not None:
        result = ParsedReply(full, "full", "")
    else:
        return ParsedReply("", "none", why_no_full)
    if len(result.source) > max_source_chars:
        return ParsedReply("", "none", f"the extracted source has {len(result.source)} characters "
                                       f"(limit {max_source_chars})")
    if "ModelNew" not in result.source:
        return ParsedReply("", "none", "the resulting file does not define ModelNew")
    return result
