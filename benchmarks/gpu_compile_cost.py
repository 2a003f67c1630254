"""Compile cost per GPU backend, cold and cached (run on a GPU machine).

- cuda (NVRTC): `cuda.compile` + first launch of N fresh sources in one process (cold:
  nothing cached), then the same sources in a fresh process (cached: cubin from disk).
- triton: first launch of N fresh kernels (an empty Triton cache dir), then the same in a
  fresh process (Triton's on-disk cache).
- cuda_inline: one KernelBench-style `load_inline` extension built cold through the build
  pool (two builds in parallel), then a cached hit in a fresh process (load only), and a
  build that runs past its deadline (killed, its directories removed).

Targets: NVRTC median < 0.5 s; Triton < 2 s; cached load_inline hit < 1 s.
Usage: python benchmarks/gpu_compile_cost.py [--n 5] [--skip-inline] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

NVRTC_CHILD = r'''
import json, sys, time, torch
from foundry.kernels import cuda
torch.zeros(1, device="cuda"); torch.cuda.synchronize()   # context up: not compile cost
out = []
for i in range(int(sys.argv[1])):
    src = r"""
extern "C" __global__ void k(const float* x, float* y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * %d.0f + 1.0f;
}""" % (i + int(sys.argv[2]))
    x = torch.randn(4096, device="cuda"); y = torch.empty_like(x)
    t0 = time.perf_counter()
    m = cuda.compile(src)
    m.k(x, y, 4096, grid=(16,), block=(256,)); torch.cuda.synchronize()
    out.append(time.perf_counter() - t0)
    assert torch.allclose(y, x * (i + int(sys.argv[2])) + 1)
print(json.dumps(out))
'''

TRITON_CHILD = r'''
import importlib.util, json, os, sys, time, torch
import triton, triton.language as tl
torch.zeros(1, device="cuda"); torch.cuda.synchronize()
out = []
for i in range(int(sys.argv[1])):
    c = float(i + int(sys.argv[2]))
    path = os.path.join(sys.argv[3], f"k_{int(c)}.py")   # @triton.jit needs a source file
    with open(path, "w") as f:
        f.write(f"""import triton
import triton.language as tl


@triton.jit
def k(X, Y, N, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = o < N
    tl.store(Y + o, tl.load(X + o, mask=m) * {c} + 1.0, mask=m)
""")
    spec = importlib.util.spec_from_file_location(f"k_{int(c)}", path)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    x = torch.randn(4096, device="cuda"); y = torch.empty_like(x)
    t0 = time.perf_counter()
    mod.k[(4,)](x, y, 4096, BLOCK=1024); torch.cuda.synchronize()
    out.append(time.perf_counter() - t0)
    assert torch.allclose(y, x * c + 1)
print(json.dumps(out))
'''

INLINE_HIT_CHILD = r'''
import json, sys, time
import torch, torch.utils.cpp_extension   # preloaded in a warm worker: not part of a hit
torch.cuda.init()
from foundry.kernels import cuda_inline
t0 = time.perf_counter()
cuda_inline.prepare_worker_env(source=open(sys.argv[1]).read())
g = {"__name__": "cand"}
exec(compile(open(sys.argv[1]).read(), sys.argv[1], "exec"), g)
t1 = time.perf_counter()
x = torch.randn(1000, device="cuda")
ok = bool(torch.equal(g["relu_ext"].relu_cuda(x), x.relu()))
print(json.dumps({"load_s": t1 - t0, "ok": ok}))
'''


def _child(code: str, *args: str, env: dict | None = None, timeout: float = 600) -> object:
    res = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                         timeout=timeout, env={**os.environ, **(env or {})})
    if res.returncode != 0:
        raise RuntimeError(res.stderr[-3000:])
    return json.loads(res.stdout.strip().splitlines()[-1])


def _summary(xs: list[float]) -> dict:
    return {"median_s": statistics.median(xs), "min_s": min(xs), "max_s": max(xs), "n": len(xs)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--skip-inline", action="store_true")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    seed = int(time.time()) % 100000  # fresh sources: nothing in any cache
    report: dict = {}
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as tcache, \
            tempfile.TemporaryDirectory() as kdir:
        env = {"FOUNDRY_CACHE_DIR": cache, "TRITON_CACHE_DIR": tcache}
        report["nvrtc_cold"] = _summary(_child(NVRTC_CHILD, str(args.n), str(seed), env=env))
        report["nvrtc_cached"] = _summary(_child(NVRTC_CHILD, str(args.n), str(seed), env=env))
        report["triton_cold"] = _summary(_child(TRITON_CHILD, str(args.n), str(seed), kdir, env=env))
        report["triton_cached"] = _summary(_child(TRITON_CHILD, str(args.n), str(seed), kdir, env=env))
    print(json.dumps(report, indent=1), flush=True)
    if not args.skip_inline:
        report.update(_inline())
    report["targets"] = {
        "nvrtc_cold_median_lt_0.5s": report["nvrtc_cold"]["median_s"] < 0.5,
        "triton_cold_median_lt_2s": report["triton_cold"]["median_s"] < 2.0,
        "inline_cached_hit_lt_1s": report.get("inline_cached_hit", {}).get("load_s", 9e9) < 1.0,
    }
    print(json.dumps(report, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0


def _inline() -> dict:
    import gpu_candidates as gc

    from foundry.kernels import cuda_inline
    out: dict = {}
    relu = gc.candidate("08_ReLU", "cuda_inline")
    twin = relu.replace("relu_kernel", "relu_kernel2").replace('name="relu_ext"', 'name="relu_ext2"')
    pool = cuda_inline.BuildPool(max_parallel=2, timeout_s=400)
    t0 = time.perf_counter()
    futs = [pool.submit(source=relu), pool.submit(source=twin)]
    results = [f.result() for f in futs]
    out["inline_cold_parallel"] = {"wall_s": time.perf_counter() - t0,
                                   "each_s": [r.seconds for r in results],
                                   "ok": [r.ok for r in results],
                                   "log_tail": [r.log[-300:] for r in results if not r.ok]}
    print(json.dumps(out, indent=1), flush=True)
    again = pool.submit(source=relu).result()
    out["inline_pool_cached"] = {"cached": again.cached, "s": again.seconds}
    pool.close()
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(relu)
    hits = [_child(INLINE_HIT_CHILD, f.name) for _ in range(3)]
    out["inline_cached_hit"] = {"load_s": statistics.median(h["load_s"] for h in hits),
                                "all_s": [h["load_s"] for h in hits], "ok": all(h["ok"] for h in hits)}
    slow = relu.replace("relu_kernel", "relu_kernel3").replace('name="relu_ext"', 'name="relu_ext3"')
    t0 = time.perf_counter()
    late = cuda_inline.build_now(source=slow, timeout_s=8)
    ext_dirs = list((cuda_inline.cache_dir("cuda_inline") / "ext").iterdir())
    out["inline_deadline"] = {"timed_out": late.timed_out, "s": time.perf_counter() - t0,
                              "candidate_dir_removed": not os.path.exists(late.directory),
                              "ext_dirs_left": len(ext_dirs)}
    return out


if __name__ == "__main__":
    sys.exit(main())
