"""The judge's place among the packages, read from the source (every import statement,
at module level or inside a function): no import circle in foundry/, islands/ or actors/;
the judge (foundry.evaluate) reaches neither the LLM, the islands nor the actors; the
kernel helpers (foundry.kernels) never reach the judge."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("foundry", "islands", "actors")


def _modules() -> dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        for f in (ROOT / pkg).rglob("*.py"):
            name = ".".join(f.relative_to(ROOT).with_suffix("").parts)
            mods[name.removesuffix(".__init__")] = f
    return mods


def _graph() -> dict[str, set[str]]:
    """module -> the project modules it imports (a package's submodule importing the
    package itself is no edge: that is how a package's modules reach each other)."""
    mods = _modules()
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for m, f in mods.items():
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            edges[m] |= {t for t in targets if t in mods and t != m and not m.startswith(t + ".")}
    return edges


def _reach(edges: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [m for m in edges if m == start or m.startswith(start + ".")]
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo.extend(edges[m])
    return seen


def _circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle_in_the_packages():
    assert _circles(_graph()) == []


def test_the_circle_finder_finds_a_circle():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_judge_reaches_neither_the_llm_nor_the_islands_nor_the_actors():
    reached = _reach(_graph(), "foundry.evaluate")
    assert "foundry.evaluate.evaluator" in reached and "foundry.kernels" in reached
    assert sorted(m for m in reached if m.startswith(("foundry.llm", "islands", "actors"))) == []


def test_the_kernel_helpers_never_reach_the_judge():
    reached = _reach(_graph(), "foundry.kernels")
    assert "foundry.kernels.cuda_module" in reached
    assert sorted(m for m in reached if m.startswith("foundry.evaluate")) == []
