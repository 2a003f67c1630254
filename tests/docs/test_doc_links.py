"""Relative links of README.md, docs/ and the benchmarks' READMEs lead to files that
exist, and a link into a Markdown page's section names a heading of that page."""

from __future__ import annotations

from support.doc_blocks import ROOT, anchors, heading_anchor, pages, relative_links

# Pages the README links to that other work adds; a link to one is checked once it exists.
PAGES_TO_COME = {"docs/cluster.md", "docs/view.md"}


def test_heading_anchor_is_githubs():
    assert heading_anchor(" The project's suite (96 tasks) at full sizes on an H200") == \
        "the-projects-suite-96-tasks-at-full-sizes-on-an-h200"
    assert heading_anchor("Hardware feedback: what profiling elites costs") == \
        "hardware-feedback-what-profiling-elites-costs"


def test_relative_links_resolve():
    broken = []
    for page in pages():
        for target in relative_links(page):
            file_part, _, anchor = target.partition("#")
            dest = (page.parent / file_part).resolve() if file_part else page
            rel = dest.relative_to(ROOT).as_posix() if dest.is_relative_to(ROOT) else str(dest)
            if not dest.exists():
                if rel not in PAGES_TO_COME:
                    broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
                continue
            if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)
