"""The shell blocks and links of the project's Markdown pages, for the tests that run them.

A fenced `bash` block is run by the tests when the line right before its fence is
`<!-- shell-test: run -->`, and listed as skipped with its reason when that line is
`<!-- shell-test: skip REASON -->` (the main job, GPU commands, anything taking over a
minute). A block with neither is an error: every command a page shows is either run or
skipped for a stated reason.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# The pages whose shell blocks and links are checked.
PAGES = ("README.md", "docs/*.md", "benchmarks/README.md", "benchmarks/investigations/README.md")

MARKER = re.compile(r"^<!--\s*shell-test:\s*(run|skip)\b\s*(.*?)\s*-->$")
FENCE_OPEN = re.compile(r"^```(bash|sh|shell)\s*$")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


@dataclass(frozen=True)
class ShellBlock:
    """One fenced shell block: where it is, what it runs, and its marker."""

    page: str          # path relative to the project root
    line: int          # 1-based line of the opening fence
    text: str          # the commands
    action: str        # "run", "skip", or "" (no marker)
    reason: str        # why it is skipped ("" for run blocks)

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"


def pages(root: Path = ROOT) -> list[Path]:
    found: list[Path] = []
    for pattern in PAGES:
        found.extend(sorted(root.glob(pattern)))
    return found


def shell_blocks(path: Path, root: Path = ROOT) -> list[ShellBlock]:
    """Every fenced bash/sh/shell block of the Markdown file `path`."""
    lines = path.read_text().splitlines()
    blocks: list[ShellBlock] = []
    i = 0
    while i < len(lines):
        if not FENCE_OPEN.match(lines[i].strip()):
            i += 1
            continue
        start = i
        marker = MARKER.match(lines[i - 1].strip()) if i > 0 else None
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i])
            i += 1
        if i == len(lines):
            raise ValueError(f"{path}:{start + 1}: shell block not closed")
        blocks.append(ShellBlock(page=str(path.relative_to(root)), line=start + 1,
                                 text="\n".join(body) + "\n",
                                 action=marker.group(1) if marker else "",
                                 reason=marker.group(2) if marker else ""))
        i += 1
    return blocks


def all_blocks(root: Path = ROOT) -> list[ShellBlock]:
    return [b for p in pages(root) for b in shell_blocks(p, root)]


# What a page's commands write (run and output folders) goes here, not into the checkout.
OUTPUT_FOLDERS = frozenset({"runs", "outputs", "multirun"})


def scratch_project(folder: Path, root: Path = ROOT) -> Path:
    """`folder` made a stand-in for the project root: a link to each of the root's entries
    but its output folders, so that a page's commands run as written from the root and
    what they write stays in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    for entry in root.iterdir():
        if entry.name not in OUTPUT_FOLDERS:
            (folder / entry.name).symlink_to(entry)
    return folder


def run_block(block: ShellBlock, *, cwd: Path, cache_dir: Path, timeout_s: float) -> subprocess.CompletedProcess:
    """Run `block` with bash (-e, -u, pipefail) in `cwd`, `python` being this interpreter,
    with its own cache root. Raises subprocess.TimeoutExpired past the timeout."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["FOUNDRY_CACHE_DIR"] = str(cache_dir)
    return subprocess.run(["bash", "-euo", "pipefail", "-c", block.text], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout_s, start_new_session=True)


def heading_anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading's text."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    names = set()
    in_fence = False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
        elif not in_fence and line.startswith("#"):
            names.add(heading_anchor(line.lstrip("#")))
    return names


def relative_links(path: Path) -> list[str]:
    """The link targets of `path` outside code blocks that are not URLs."""
    targets = []
    in_fence = False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        for target in LINK.findall(line):
            if not re.match(r"^[a-z]+://|^mailto:", target):
                targets.append(target)
    return targets
