"""load_inline caching: per-candidate dirs, stale locks, timeouts, a real cached build."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from foundry.kernels import cuda_inline

CPU_EXT = '''
import torch
from torch.utils.cpp_extension import load_inline
CPP = """
#include <torch/extension.h>
torch::Tensor twice(torch::Tensor x) { return x * 2; }
"""
ext = load_inline(name="twice_ext", cpp_sources=CPP, functions=["twice"], verbose=False)
PARAMS = {}
'''


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FOUNDRY_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    monkeypatch.delenv("TORCH_EXTENSIONS_DIR", raising=False)


def test_dir_depends_on_source_params_and_arch():
    a = cuda_inline.extensions_dir(source="x = 1")
    assert a == cuda_inline.extensions_dir(source="x = 1")
    assert a != cuda_inline.extensions_dir(source="x = 2")
    assert a != cuda_inline.extensions_dir(source="x = 1", params={"BLOCK": 128})
    assert a != cuda_inline.extensions_dir(source="x = 1", archs="8.0")


def test_detects_load_inline():
    assert cuda_inline.uses_load_inline(CPU_EXT)
    assert not cuda_inline.uses_load_inline("from foundry.kernels import cuda")


def test_prepare_worker_env_sets_extensions_dir():
    d = cuda_inline.prepare_worker_env(source=CPU_EXT)
    assert os.environ["TORCH_EXTENSIONS_DIR"] == str(d) and d.is_dir()
    assert json.loads((d / cuda_inline.OWNER_FILE).read_text())["pid"] == os.getpid()


def test_lock_of_a_dead_builder_is_removed_a_live_ones_kept():
    d = cuda_inline.extensions_dir(source="s")
    (d / "ext").mkdir()
    lock = d / "ext" / "lock"
    lock.write_text("")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (d / cuda_inline.OWNER_FILE).write_text(json.dumps({"pid": dead.pid}))
    assert cuda_inline.clear_stale_locks(d) == [lock] and not lock.exists()
    lock.write_text("")
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (d / cuda_inline.OWNER_FILE).write_text(json.dumps({"pid": live.pid}))
        assert cuda_inline.clear_stale_locks(d) == [] and lock.exists()
        old = time.time() - 3600
        os.utime(lock, (old, old))  # a live but hour-old lock is stale too
        assert cuda_inline.clear_stale_locks(d, stale_after_s=900) == [lock]
    finally:
        live.kill()
        live.wait()


def test_timed_out_build_is_killed_and_its_dir_removed():
    src = "import time\nload_inline = None\ntime.sleep(60)\n"
    t0 = time.perf_counter()
    out = cuda_inline.build_now(source=src, timeout_s=2.0)
    assert out.timed_out and not out.ok
    assert time.perf_counter() - t0 < 20
    assert not os.path.exists(out.directory)


def test_failing_build_reports_its_error():
    out = cuda_inline.build_now(source="raise ValueError('broken candidate')\n", timeout_s=60)
    assert not out.ok and "broken candidate" in out.log


def test_real_load_inline_build_is_cached_per_candidate():
    pytest.importorskip("torch")
    import shutil
    if not (shutil.which("c++") or shutil.which("g++")) or not shutil.which("ninja") and \
            not os.path.exists(os.path.join(os.path.dirname(sys.executable), "ninja")):
        pytest.skip("no C++ compiler or ninja")
    pool = cuda_inline.BuildPool(max_parallel=1, timeout_s=240)
    try:
        first = pool.submit(source=CPU_EXT).result()
        assert first.ok, first.log
        ext_root = cuda_inline.cache_dir("cuda_inline") / "ext"
        built = [p for p in ext_root.rglob("*.so")]
        assert len(built) == 1, built
        assert (built[0].parent / cuda_inline.BUILT_MARK).exists()
        again = cuda_inline.build_now(source=CPU_EXT)
        assert again.cached and again.ok
    finally:
        pool.close()
    # an executing worker (even of a file that differs elsewhere): same build, only loads
    other = CPU_EXT + "\n# a different candidate file, the same extension\n"
    code = ("import os, time, sys; from foundry.kernels import cuda_inline as ci\n"
            f"d = ci.prepare_worker_env(source={other!r})\n"
            "t = time.perf_counter(); g = {}; exec(" + repr(other) + ", g)\n"
            "import torch; assert g['ext'].twice(torch.ones(3)).tolist() == [2.0, 2.0, 2.0]\n"
            "print(time.perf_counter() - t)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env=dict(os.environ))
    assert res.returncode == 0, res.stderr[-2000:]
    assert float(res.stdout.strip().splitlines()[-1]) < 5.0
    assert len(list(ext_root.rglob("*.so"))) == 1  # nothing was rebuilt
