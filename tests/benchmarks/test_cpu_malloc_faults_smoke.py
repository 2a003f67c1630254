"""benchmarks/investigations/cpu_malloc_faults.py runs end to end on a small suite task: one round under
each malloc setting, a timing of eager and of a candidate in each."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CANDIDATE = '''
import torch.nn as nn
class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()
    def forward(self, x):
        return x.clamp_min(0.0)
'''


def test_one_round_of_each_setting(tmp_path):
    candidate = tmp_path / "candidate.py"
    candidate.write_text(CANDIDATE)
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "investigations" / "cpu_malloc_faults.py"),
                          str(ROOT / "benchmarks" / "suite" / "level1" / "08_ReLU.py"), str(candidate),
                          "--rounds", "1", "--repeats", "1"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    assert [line.split(":")[0] for line in lines] == ["round 1, glibc default", "round 1, workers' settings"]
    for line in lines:
        assert re.search(r"eager [\d.]+ ms/\d+, candidate [\d.]+ ms/\d+$", line), line
