"""What running a model as its captured graph costs: eager against the torch.export
GraphModule that `foundry.extract.capture` makes (the graph `foundry.deploy` rewrites) and
against `torch.fx.symbolic_trace`, for a host-bound and two device-bound models; the top
kernels of eager and of the export graph by device time, so a difference can be placed on
the host or on the device.

    python benchmarks/investigations/graph_overhead.py [--device cuda|cpu] [--small] [--profile] [--cprofile]

`--small`: the MLP at width 16, batch 2 x 4 (a host-bound call on any machine), the
convolution stack left out.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
import torch.fx as fx
import torch.nn as nn

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from foundry.extract.capture import capture  # noqa: E402


class Block(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.ln, self.up, self.down = nn.LayerNorm(width), nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x):
        return x + self.down(nn.functional.gelu(self.up(self.ln(x)), approximate="tanh"))


class MLP(nn.Module):
    def __init__(self, width: int = 768, blocks: int = 12):
        super().__init__()
        self.blocks = nn.ModuleList(Block(width) for _ in range(blocks))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


class ConvStack(nn.Module):
    def __init__(self, channels: int = 64, layers: int = 8):
        super().__init__()
        self.stem, self.bn = nn.Conv2d(3, channels, 7, 2, 3, bias=False), nn.BatchNorm2d(channels)
        self.body = nn.Sequential(*[nn.Sequential(nn.Conv2d(channels, channels, 3, 1, 1, bias=False),
                                                  nn.BatchNorm2d(channels), nn.ReLU(inplace=True))
                                    for _ in range(layers)])

    def forward(self, x):
        return self.body(torch.relu(self.bn(self.stem(x))))


def per_call_ms(fn, inputs, device: str, calls: int = 30, rounds: int = 5) -> float:
    """The best of `rounds` of `calls` back-to-back calls, per call (device time on CUDA)."""
    with torch.no_grad():
        for _ in range(5):
            fn(*inputs)
        best = float("inf")
        for _ in range(rounds):
            if device == "cuda":
                torch.cuda.synchronize()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(calls):
                    fn(*inputs)
                end.record()
                torch.cuda.synchronize()
                best = min(best, start.elapsed_time(end) / calls)
            else:
                t0 = time.perf_counter()
                for _ in range(calls):
                    fn(*inputs)
                best = min(best, (time.perf_counter() - t0) * 1e3 / calls)
    return best


def top_kernels(fn, inputs, device: str, rows: int = 10) -> str:
    from torch.profiler import ProfilerActivity, profile
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with torch.no_grad():
        fn(*inputs)
        with profile(activities=activities) as prof:
            for _ in range(3):
                fn(*inputs)
            if device == "cuda":
                torch.cuda.synchronize()
    return prof.key_averages().table(sort_by="device_time_total" if device == "cuda" else "self_cpu_time_total",
                                     row_limit=rows)


def host_functions(fn, inputs, calls: int = 500, rows: int = 10) -> str:
    """Where the host's time goes in `calls` calls of `fn` (cProfile, by own time)."""
    import cProfile
    import io
    import pstats
    profiler = cProfile.Profile()
    with torch.no_grad():
        profiler.enable()
        for _ in range(calls):
            fn(*inputs)
        profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(rows)
    return f"({calls} calls)\n" + text.getvalue()


def models(device: str, small: bool) -> list:
    if small:
        return [("MLP, width 16, 12 blocks, 2 x 4, fp32", MLP(16), (torch.randn(2, 4, 16, device=device),))]
    return [("MLP, width 768, 12 blocks, 8 x 256, fp32", MLP(), (torch.randn(8, 256, 768, device=device),)),
            ("the same in bf16", MLP().to(torch.bfloat16),
             (torch.randn(8, 256, 768, device=device, dtype=torch.bfloat16),)),
            ("conv-BN-ReLU stack, batch 32, 224 x 224", ConvStack(), (torch.randn(32, 3, 224, 224, device=device),))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=("cuda", "cpu"))
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--profile", action="store_true", help="also print the top kernels of eager and the export graph")
    ap.add_argument("--cprofile", action="store_true", help="also print where the export graph's host time goes")
    a = ap.parse_args()
    for name, model, inputs in models(a.device, a.small):
        model = model.to(a.device).eval()
        captured = capture(model, inputs)
        exported, traced = captured.graph_module, fx.symbolic_trace(model)
        eager_ms = per_call_ms(model, inputs, a.device)
        export_ms = per_call_ms(exported, inputs, a.device)
        fx_ms = per_call_ms(traced, inputs, a.device)
        print(f"{name}: eager {eager_ms:.4g} ms, export graph ({captured.method}) {export_ms:.4g} ms "
              f"({export_ms / eager_ms:.3f}x eager's time), fx trace {fx_ms:.4g} ms ({fx_ms / eager_ms:.3f}x)",
              flush=True)
        if a.profile:
            print("eager:\n" + top_kernels(model, inputs, a.device), flush=True)
            print("export graph:\n" + top_kernels(exported, inputs, a.device), flush=True)
        if a.cprofile:
            print("export graph, host functions " + host_functions(exported, inputs), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
