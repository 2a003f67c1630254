"""A screen's settings built ahead (foundry.evaluate.triton_prebuild): forked children
compile each setting's kernel with Triton's real compiler for the H200 into Triton's
disk cache, a failing or hanging child costs only its own setting, and a later build of
the same setting finds its kernel there. Run in a fresh process: this session runs
Triton's interpreter, which replaces the compiler."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r'''
import json, os, sys, time, types
import torch
from foundry.evaluate import triton_prebuild as tp

SOURCE = """
import torch, triton, triton.language as tl

@triton.jit
def double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        double[(triton.cdiv(x.numel(), PARAMS["BLOCK"]),)](x, y, x.numel(), BLOCK=PARAMS["BLOCK"])
        return y
"""
path = os.path.join(sys.argv[1], "candidate.py")
with open(path, "w") as f:
    f.write(SOURCE)


def build(point):
    if point.get("fail"):
        raise RuntimeError("this setting does not build")
    if point.get("hang"):
        time.sleep(120)
    module = types.ModuleType("candidate")
    module.__file__, module.PARAMS = path, point
    exec(compile(SOURCE, path, "exec"), module.__dict__)
    module.ModelNew()(torch.empty(1 << 20, device="meta"))


why = tp.unsupported()
if why:
    print(json.dumps({"unsupported": why}))
    raise SystemExit(0)
cache = os.environ["TRITON_CACHE_DIR"]
points = [{"BLOCK": 256}, {"BLOCK": 512}, {"fail": 1}, {"hang": 1}, {"BLOCK": 1024}]
report = tp.prebuild(points, build, target=tp.H200, workers=3, timeout_s=20.0)  # ample for a compile on a busy machine
entries = sorted(os.listdir(cache))
with tp.builds_only(tp.H200) as built:  # the same setting again, in this process
    build({"BLOCK": 512})
print(json.dumps({"built": report.built, "timed_out": report.timed_out, "wall_s": report.wall_s, "entries": len(entries),
                  "entries_after": len(os.listdir(cache)), "kernels": built.kernels}))
'''


def test_children_build_each_setting_into_the_cache_and_failures_stay_theirs(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton")
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    if "unsupported" in row:
        pytest.skip(row["unsupported"])
    assert row["built"] == [True, True, False, False, True]  # the raising and the hanging setting lost alone
    assert row["timed_out"] == [False, False, False, True, False]  # failing fast is not timing out
    assert row["wall_s"] < 60  # the hanging child was killed at its timeout
    assert row["entries"] == 3  # one kernel per setting that built, in Triton's disk cache
    assert row["entries_after"] == 3  # built again here: found in the cache, nothing new compiled
    assert row["kernels"] == [["double", 0]]
