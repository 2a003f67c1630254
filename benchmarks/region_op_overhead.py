"""What a deployed region costs a call beyond its kernel: the region's dispatch called
directly (plain eager inference), its `with_grad` custom op, its `inference` op, and ten
regions in a row in a model, eager and under torch.compile (foundry.deploy.region_op).

    python benchmarks/region_op_overhead.py [--device cpu] [--rows 8] [--width 256] [--calls 3000]

The region is a tanh, its "kernel" torch.tanh itself, so what differs between the lines is
the calling layers alone; `torch.tanh` alone is printed for scale. Microseconds a call,
the median of five rounds."""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.fx as fx
import torch.nn as nn

from foundry.deploy.region_op import RegionDispatch, dispatch_key, region_call, register_region_op

CHAIN = 10  # regions in a row in the model


class _Tanh(nn.Module):
    def forward(self, x):
        return torch.tanh(x)


class _Region(nn.Module):  # the captured subgraph's shape: a tuple of outputs
    def forward(self, x):
        return (torch.tanh(x),)


class _Chain(nn.Module):
    def __init__(self, call):
        super().__init__()
        self.call = call

    def forward(self, x):
        for _ in range(CHAIN):
            x = self.call([x])[0]
        return x


def per_call_us(fn, calls: int, device: str, rounds: int = 5) -> float:
    """Median over `rounds` of the mean microseconds of one `fn()` (no grad)."""
    def sync():
        if device.startswith("cuda"):
            torch.cuda.synchronize()
    times = []
    with torch.no_grad():
        for _ in range(max(calls // 20, 10)):
            fn()
        for _ in range(rounds):
            sync()
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            sync()
            times.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--calls", type=int, default=3000)
    a = ap.parse_args(argv)
    x = torch.randn(a.rows, a.width, device=a.device)
    dispatch = RegionDispatch(task_id="tanh", fallback=fx.symbolic_trace(_Region()), n_activations=1,
                              kernels={dispatch_key([x]): _Tanh()})
    ops = register_region_op(dispatch)
    call = region_call(ops, dispatch)
    n = a.calls
    print(f"torch {torch.__version__}, {a.device}, {torch.get_num_threads()} thread(s), a {a.rows} x {a.width} "
          f"tanh; microseconds a call:")
    print(f"  torch.tanh alone            {per_call_us(lambda: torch.tanh(x), n, a.device):8.1f}")
    print(f"  dispatch, called directly   {per_call_us(lambda: dispatch([x]), n, a.device):8.1f}")
    print(f"  with_grad op (custom_op)    {per_call_us(lambda: ops.with_grad([x]), n, a.device):8.1f}")
    print(f"  inference op                {per_call_us(lambda: ops.inference([x]), n, a.device):8.1f}")
    eager = _Chain(call)
    compiled = torch.compile(_Chain(call))
    compiled_with_grad = torch.compile(_Chain(ops.with_grad))  # what region_call compiled to before the inference op
    chain = n // CHAIN
    print(f"{CHAIN} regions in a row, per forward:")
    print(f"  eager (dispatch directly)                 {per_call_us(lambda: eager(x), chain, a.device):8.1f}")
    print(f"  torch.compile, the with_grad op           {per_call_us(lambda: compiled_with_grad(x), chain, a.device):8.1f}")
    print(f"  torch.compile, region_call (inference op) {per_call_us(lambda: compiled(x), chain, a.device):8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
