"""benchmarks/conv_layout.py on the CPU at a tiny size: every form of the stack runs and
matches eager, and a model whose channels-last form cannot run is reported, not timed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "conv_layout.py"

VIEWS_ITS_ACTIVATION = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.fc = nn.Linear(4 * 6 * 6, 2)

    def forward(self, x):
        return self.fc(self.conv(x).view(-1, 4 * 6 * 6))

def get_inputs():
    return [torch.randn(2, 3, 8, 8)]

def get_init_inputs():
    return []
'''


def test_the_stack_in_every_form_and_a_model_that_cannot_go_channels_last(tmp_path):
    task = tmp_path / "1_ViewsItsActivation.py"
    task.write_text(VIEWS_ITS_ACTIVATION)
    out = tmp_path / "figures.json"
    done = subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu", "--blocks", "2", "--wrapped", "1",
                           "--batch", "1", "--channels", "8", "--size", "8", "--model", str(task), "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    stack = report["stack"]
    assert set(stack) == {"eager", "compiled", "compiled, region ops", "channels-last compiled",
                          "channels-last compiled, region ops", "channels-last compiled, layout-keeping ops"}
    assert all(ms is not None and ms > 0 and err < 1e-4 for ms, err in stack.values()), stack
    model = report["models"][str(task)]
    assert model["eager"][0] > 0 and model["compiled"][0] > 0
    ms, why = model["channels-last compiled"]
    assert ms is None and "Error" in why, model
    assert "failed:" in done.stdout
