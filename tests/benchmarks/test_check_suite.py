"""benchmarks/check_suite.py on a small folder: per-task rows, failures recorded without
stopping the run, a subset by id, and the flagged tasks written with their reasons."""

from __future__ import annotations

import csv
from pathlib import Path

from support.benchmark_script import load_benchmark

TASK = '''import torch
import torch.nn as nn
{extra}

class Model(nn.Module):
    def forward(self, x):
        {body}


def get_inputs():
    return [torch.randn(16, 16)]


def get_init_inputs():
    return []
'''


def _script():
    return load_benchmark("check_suite")


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "tasks"
    folder.mkdir()
    files = {
        "1_tanh.py": ("return torch.tanh(x)", ""),
        "2_constant.py": ("return torch.zeros_like(x) + 3.0", ""),
        "3_out_of_memory.py": ("raise MemoryError('cannot allocate')", ""),
        "4_declared.py": ("return torch.zeros_like(x) + 1.0", 'DEGENERATE_OK = "one value by design"'),
    }
    for name, (body, extra) in files.items():
        (folder / name).write_text(TASK.format(body=body, extra=extra))
    return folder


def test_check_suite_records_every_task_and_writes_the_flagged_ones(tmp_path, capsys):
    out = tmp_path / "flagged.md"
    rc = _script().main(["--path", str(_folder(tmp_path)), "--out", str(out)])
    printed = capsys.readouterr().out
    assert rc == 1
    for n, task in enumerate(["1_tanh", "2_constant", "3_out_of_memory", "4_declared"], 1):
        assert f"| {n}/4 | {task} |" in printed
    assert "4 tasks (level 0: 4); 1 not degenerate, 1 degenerate, 1 flagged but declared DEGENERATE_OK, 1 failed" \
        in printed
    text = out.read_text()
    assert "| 2_constant | degenerate |" in text and "one value repeated (3)" in text
    assert "| 3_out_of_memory | error |" in text and "MemoryError" in text
    assert "| 4_declared | declared ok |" in text and "one value by design" in text
    assert "1_tanh" not in text  # only flagged and failing tasks are listed
    assert '"answers"' in text  # with their figures


def test_check_suite_runs_a_subset_and_writes_csv(tmp_path, capsys):
    out = tmp_path / "flagged.csv"
    rc = _script().main(["--path", str(_folder(tmp_path)), "--ids", "1", "2", "--out", str(out)])
    assert rc == 1
    rows = list(csv.DictReader(out.open()))
    assert [(r["task"], r["verdict"]) for r in rows] == [("2_constant", "degenerate")]
    assert "2 tasks" in capsys.readouterr().out
    assert _script().main(["--path", str(tmp_path / "tasks"), "--ids", "1"]) == 0  # nothing flagged


LOSS = '''import torch
import torch.nn as nn
import torch.nn.functional as F

TOLERANCES = {"atol": 5e-3, "rtol": 5e-3}


class Model(nn.Module):
    def forward(self, predictions, targets):
        return F.cross_entropy(predictions, targets)


def get_inputs():
    return [torch.rand(1024, 512), torch.randint(0, 512, (1024,))]


def get_init_inputs():
    return []
'''


def test_check_suite_shows_the_inputs_the_judge_checks_differentially(tmp_path, capsys):
    folder = tmp_path / "losses"
    folder.mkdir()
    (folder / "1_cross_entropy.py").write_text(LOSS)
    (folder / "2_tanh.py").write_text(TASK.format(body="return torch.tanh(x)", extra=""))
    out = tmp_path / "listed.md"
    assert _script().main(["--path", str(folder), "--out", str(out)]) == 0  # not degenerate
    printed = capsys.readouterr().out
    row = next(line for line in printed.splitlines() if "| 1_cross_entropy |" in line)
    assert "| ok |" in row and "| 1 (0." in row and "the judge checks differentially" in row
    assert "1 with inputs the judge checks differentially" in printed
    text = out.read_text()
    assert "| 1_cross_entropy | ok |" in text and '"differential_inputs":[1]' in text
    assert "2_tanh" not in text
    csv_out = tmp_path / "listed.csv"
    _script().main(["--path", str(folder), "--ids", "1", "--out", str(csv_out)])
    rows = list(csv.DictReader(csv_out.open()))
    assert [(r["task"], r["verdict"]) for r in rows] == [("1_cross_entropy", "ok")]
    assert rows[0]["differential_inputs"].startswith("1 (")
