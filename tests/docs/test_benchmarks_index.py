"""benchmarks/README.md names every script in benchmarks/, investigations/README.md every
script there, and each RESULTS.md section the index names is a section of RESULTS.md."""

from __future__ import annotations

import re

from support.doc_blocks import ROOT, heading_anchor

BENCHMARKS = ROOT / "benchmarks"


def _named(readme) -> set[str]:
    return set(re.findall(r"`([\w/]+\.py)`", readme.read_text()))


def test_the_index_names_every_script():
    missing = sorted(p.name for p in BENCHMARKS.glob("*.py") if p.name not in _named(BENCHMARKS / "README.md"))
    assert not missing, f"benchmarks/README.md does not list {missing}"


def test_the_investigations_readme_names_every_script_there():
    folder = BENCHMARKS / "investigations"
    missing = sorted(p.name for p in folder.glob("*.py") if p.name not in _named(folder / "README.md"))
    assert not missing, f"benchmarks/investigations/README.md does not list {missing}"


def test_the_sections_the_index_names_are_in_results():
    results = {heading_anchor(line.lstrip("#")) for line in (BENCHMARKS / "RESULTS.md").read_text().splitlines()
               if line.startswith("## ")}
    rows = [line.split("|") for line in (BENCHMARKS / "README.md").read_text().splitlines()
            if line.startswith("| `") and line.count("|") == 4]
    named = [name.strip() for row in rows for name in row[3].split(";") if name.strip()]
    assert named, "no RESULTS.md sections found in the index's tables"
    unknown = [name for name in named if heading_anchor(name) not in results]
    assert not unknown, f"benchmarks/README.md names sections RESULTS.md does not have: {unknown}"
