"""The descriptor corpus is real code: its Triton kernels run under Triton's
interpreter and its C kernels build and run, and all match torch."""

import os
import pathlib
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).parent


def test_triton_and_c_corpus_kernels_compute_the_right_thing():
    pytest.importorskip("triton")
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, str(HERE / "islands_corpus_check.py")], env=env,
                          capture_output=True, text=True, timeout=240)
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 16, proc.stdout + proc.stderr[-3000:]
    failures = [line for line in lines if not line.endswith(" ok")]
    assert not failures and proc.returncode == 0, "\n".join(failures) + proc.stderr[-2000:]
