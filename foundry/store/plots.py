"""PNG plots of a run (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from foundry.store.summary import TaskSummary  # noqa: E402

LEVELS = 4  # each descriptor axis has four levels (DESIGN.md, "Descriptors")


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_progress(summaries: Mapping[str, TaskSummary], path: Path) -> Path | None:
    """Best correct speedup vs eager over the task's evaluations, one line per task."""
    lines = {t: s.curve for t, s in summaries.items() if any(v is not None for _, v in s.curve)}
    if not lines:
        return None
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for task_id, curve in sorted(lines.items()):
        xs = [n for n, v in curve if v is not None]
        ys = [v for _, v in curve if v is not None]
        ax.step(xs, ys, where="post", label=task_id)
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax.set_xlabel("evaluations of the task")
    ax.set_ylabel("best speedup vs eager (correct kernels)")
    ax.set_title("Best speedup over evaluations")
    if len(lines) <= 12:
        ax.legend(fontsize=7)
    return _save(fig, path)


def plot_archive(summary: TaskSummary, path: Path) -> Path | None:
    """Heat-map of the task's archive: memory level x compute level, best fitness over
    the parallelism axis (and islands); empty cells blank."""
    cells = {k: v for k, v in summary.cells.items() if len(k) >= 2}
    if not cells:
        return None
    grid = [[math.nan] * LEVELS for _ in range(LEVELS)]
    for key, fit in cells.items():
        m, c = int(key[0]), int(key[1])
        if 0 <= m < LEVELS and 0 <= c < LEVELS:
            grid[c][m] = fit if math.isnan(grid[c][m]) else max(grid[c][m], fit)
    fig, ax = plt.subplots(figsize=(4.5, 4))
    im = ax.imshow(grid, origin="lower", cmap="viridis")
    for c in range(LEVELS):
        for m in range(LEVELS):
            if not math.isnan(grid[c][m]):
                ax.text(m, c, f"{grid[c][m]:.2f}", ha="center", va="center", color="w", fontsize=8)
    ax.set_xticks(range(LEVELS))
    ax.set_yticks(range(LEVELS))
    ax.set_xlabel("memory level")
    ax.set_ylabel("compute level")
    ax.set_title(f"{summary.task_id}: archive (fitness)", fontsize=9)
    fig.colorbar(im, ax=ax, shrink=0.8)
    return _save(fig, path)


def plot_roofline(summaries: Mapping[str, TaskSummary], path: Path) -> Path | None:
    """Per task, the best kernel's runtime, eager's and torch.compile's, each as a multiple
    of the task's roofline floor (1 = at the floor; log scale); tasks whose best kernel has
    no roofline position are left out."""
    rows = [(t, s) for t, s in sorted(summaries.items()) if s.best_roofline and s.best_runtime_ms]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(rows) + 2), 4.5))
    width = 0.27
    for k, (label, attr) in enumerate((("best kernel", "best_runtime_ms"), ("eager", "eager_ms"),
                                       ("torch.compile", "compile_ms"))):
        xs, ys = [], []
        for i, (_, s) in enumerate(rows):
            ms = getattr(s, attr)
            if ms:
                xs.append(i + (k - 1) * width)
                ys.append(ms / s.best_roofline["floor_ms"])
        ax.bar(xs, ys, width=width, label=label)
    ax.axhline(1.0, color="black", lw=1.0, ls="--", label="roofline floor")
    ax.set_yscale("log")
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([f"{t}\n({s.best_roofline.get('bound', '?')})" for t, s in rows], fontsize=7, rotation=20,
                       ha="right")
    ax.set_ylabel("runtime / roofline floor")
    ax.set_title("Runtime against each task's roofline floor")
    ax.legend(fontsize=7)
    return _save(fig, path)
