"""A run in a browser: `python -m foundry.view RUN_DIR` serves a live page of a run
directory (per task: best speedups over evaluations and time, each island's archive, the
best kernel's lineage, every kernel's source, diff and verdict; for the run: judged per
minute, the judge's phases, evaluators, LLM spend, prompt strategies), and
`python -m foundry.view RUN_DIR --html` writes the same page once as `report.html`.
It only reads the run directory. See docs/view.md."""
