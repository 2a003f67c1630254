"""islands/ is pure Python: nothing under it imports ray (nor torch)."""

import ast
import pathlib
import subprocess
import sys

import islands

ROOT = pathlib.Path(islands.__file__).parent
FORBIDDEN = {"ray", "torch", "actors"}


def _imported_roots(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "__import__":
            roots.add("__import__")
    return roots


def test_no_module_under_islands_imports_ray_or_torch():
    files = sorted(ROOT.rglob("*.py"))
    assert len(files) >= 8
    for f in files:
        bad = _imported_roots(f) & (FORBIDDEN | {"__import__", "importlib"})
        assert not bad, f"{f.name} imports {sorted(bad)}"


def test_importing_islands_loads_neither_ray_nor_torch():
    code = ("import sys, islands, islands.migration, islands.checkpoint; "
            "print(sorted(m for m in ('ray', 'torch', 'actors') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
