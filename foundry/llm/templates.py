"""Loading and rendering the prompt files under `foundry/llm/prompts/`.

Templates use `string.Template` placeholders (`${name}`); substituted values are not
re-scanned, so code containing `$` is safe. A missing placeholder value renders as an
empty string, and runs of blank lines left by empty blocks collapse to one.

File formats:
- a plain template: the whole file (`system.md`, `optimize.md`, ...);
- a block file (`blocks.md`): blocks introduced by lines `=== block: NAME ===`;
- a sectioned file (`variants/*.md`): sections introduced by lines `## NAME`;
- a keyed list (`descriptor_levels.md`, `edit/strategies.md`): lines `key: value`.
"""

from __future__ import annotations

import functools
import re
import string
from pathlib import Path
from typing import Mapping

PROMPT_DIR = Path(__file__).resolve().parent / "prompts"
_BLOCK = re.compile(r"^=== block: ([A-Za-z0-9_]+) ===[ \t]*$", re.M)
_SECTION = re.compile(r"^## ([A-Za-z0-9_]+)[ \t]*$", re.M)


class PromptFileError(ValueError):
    """A prompt file is missing or malformed."""


@functools.lru_cache(maxsize=None)
def read(name: str) -> str:
    """The text of a prompt file, by its path relative to the prompts folder."""
    path = PROMPT_DIR / name
    try:
        return path.read_text()
    except OSError as e:
        raise PromptFileError(f"prompt file {name!r} cannot be read from {PROMPT_DIR}: "
                              f"{e.strerror or e}") from None


def _split(text: str, pattern: re.Pattern, name: str) -> dict[str, str]:
    parts = pattern.split(text)
    if len(parts) < 3:
        raise PromptFileError(f"prompt file {name!r} has no {pattern.pattern!r} headers")
    return {parts[i]: parts[i + 1].strip("\n") for i in range(1, len(parts), 2)}


@functools.lru_cache(maxsize=None)
def blocks(name: str = "blocks.md") -> Mapping[str, str]:
    return _split(read(name), _BLOCK, name)


@functools.lru_cache(maxsize=None)
def sections(name: str) -> Mapping[str, str]:
    return _split(read(name), _SECTION, name)


@functools.lru_cache(maxsize=None)
def keyed(name: str) -> Mapping[str, str]:
    out = {}
    for line in read(name).splitlines():
        if line.strip():
            key, sep, value = line.partition(":")
            if not sep:
                raise PromptFileError(f"prompt file {name!r}: line {line!r} is not 'key: value'")
            out[key.strip()] = value.strip()
    return out


def variant_names() -> list[str]:
    """The built-in prompt variants (files under prompts/variants/)."""
    return sorted(p.stem for p in (PROMPT_DIR / "variants").glob("*.md"))


def render(template: str, values: Mapping[str, object]) -> str:
    """Fill `${name}` placeholders; unknown ones become empty; collapse blank runs."""
    filled = _Template(template).safe_substitute(_Blank({k: "" if v is None else str(v)
                                                         for k, v in values.items()}))
    filled = re.sub(r"\n[ \t]*(\n[ \t]*){2,}", "\n\n", filled)
    return filled.strip() + "\n"


def block(name: str, **values: object) -> str:
    """Render one block of blocks.md."""
    try:
        tpl = blocks()[name]
    except KeyError:
        raise PromptFileError(f"blocks.md has no block {name!r}") from None
    return render(tpl, values).rstrip("\n")


class _Template(string.Template):
    idpattern = r"[a-z][a-z0-9_]*"


class _Blank(dict):
    def __missing__(self, key: str) -> str:
        return ""
