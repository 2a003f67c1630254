"""What a deployed region costs inside a compiled convolution network, and whether tracing
the network channels-last takes that cost away.

Inductor lays a convolution network's activations out channels-last (its layout
optimization), while a region op (foundry.deploy.region_op) keeps the layout it was
traced with. Traced from contiguous (NCHW) tensors, the op's neighbours then copy its
activations between the two layouts; traced from a model and inputs already
channels-last, the op receives and returns channels-last tensors. Two measurements, each
timed interleaved in one process (foundry.extract.timing, a synchronise per call):

- `stack`: a chain of conv + BatchNorm + ReLU blocks at ResNet's first stage's sizes, with
  `--wrapped` of them as region ops whose kernel is the block's own torch code, so only the
  op's boundary differs from the plain chain; plain and wrapped, traced NCHW and
  channels-last, under torch.compile (with CUDA graphs on a GPU). Wrapped two ways: as
  deploy's region ops (which hand their kernel contiguous tensors and return contiguous
  ones), and as a custom op that keeps its input's layout (what a kernel taking
  channels-last tensors would allow).
- `model`: each KernelBench task file given (its Model at its own sizes), eager and under
  torch.compile as it is and converted to channels-last (its parameters and its input).

    python benchmarks/conv_layout.py [--device cuda] [--wrapped 2] [--blocks 6] [--batch 10] [--size 56]
        [--channels 256] [--model <kernelbench>/level3/10_ResNet101.py ...] [--json FILE]

Milliseconds a forward, the largest difference from the plain eager output, and the
torch version and device printed; `--json` writes the same figures."""

from __future__ import annotations

import argparse
import json
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from foundry.deploy.region_op import RegionDispatch, dispatch_key, region_call, register_region_op
from foundry.extract.timing import interleaved_median_ms


class _Block(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(channels)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


class _Region(nn.Module):  # the captured subgraph's shape: (activation, *parameters) -> outputs
    def forward(self, x, weight, gamma, beta, mean, var):
        return (torch.relu(F.batch_norm(F.conv2d(x, weight, padding=1), mean, var, gamma, beta, False)),)


class _Stack(nn.Module):
    def __init__(self, blocks: int, channels: int):
        super().__init__()
        self.blocks = nn.ModuleList(_Block(channels) for _ in range(blocks))
        self.calls: dict = {}  # block index -> region call standing for it

    def forward(self, x):
        for i, b in enumerate(self.blocks):
            call = self.calls.get(i)
            x = b(x) if call is None else call([x, b.conv.weight, b.bn.weight, b.bn.bias, b.bn.running_mean,
                                                 b.bn.running_var])[0]
        return x


@torch.library.custom_op("foundry_bench::layout_keeping_block", mutates_args=())
def _layout_keeping_block(x: torch.Tensor, weight: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor,
                          mean: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
    return _Region()(x, weight, gamma, beta, mean, var)[0]


@_layout_keeping_block.register_fake
def _(x, weight, gamma, beta, mean, var):
    return torch.empty_like(x)  # in x's layout, as the block's own code returns it


def _wrap(stack: _Stack, x: torch.Tensor, wrapped: int, *, keep_layout: bool = False) -> None:
    """Make the middle `wrapped` blocks of `stack` region ops (their kernel: the block
    itself), or, `keep_layout`, the custom op that keeps its input's layout."""
    first = (len(stack.blocks) - wrapped) // 2
    for i in range(first, first + wrapped):
        if keep_layout:
            stack.calls[i] = lambda args: (_layout_keeping_block(*args),)
            continue
        dispatch = RegionDispatch(task_id=f"block{i}", fallback=_Region(), n_activations=1,
                                  kernels={dispatch_key([x]): stack.blocks[i]})
        stack.calls[i] = region_call(register_region_op(dispatch), dispatch)


def _channels_last_inputs(inputs: tuple) -> tuple:
    return tuple(x.to(memory_format=torch.channels_last) if isinstance(x, torch.Tensor) and x.dim() == 4 else x
                 for x in inputs)


def _channels_last(model: nn.Module, inputs: tuple) -> tuple[nn.Module, tuple]:
    model = model.to(memory_format=torch.channels_last)  # in place: the 4-D parameters and buffers
    return model, _channels_last_inputs(inputs)


def _compiled(model: nn.Module, device: str) -> nn.Module:
    return torch.compile(model, mode="reduce-overhead" if device.startswith("cuda") else None)


def _timed(named: dict, inputs_of: dict, device: str) -> dict:
    """{name: (ms, max abs difference from the first)} of the models in `named`; a model
    that raises (e.g. a `.view` of a channels-last activation) gets (None, its error)."""
    outs, failed = {}, {}
    with torch.no_grad():
        for name, model in named.items():
            try:
                for _ in range(3):  # compile, record, replay
                    out = model(*inputs_of[name])
                outs[name] = (out[0] if isinstance(out, (tuple, list)) else out).float().clone()
            except Exception as e:  # noqa: BLE001 - the form does not run: said, not timed
                failed[name] = (None, f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:160]}")
    ok = [n for n in named if n in outs]
    ms = interleaved_median_ms([(lambda m=named[n], n=n: m(*inputs_of[n])) for n in ok], device=device)
    first = outs[ok[0]]
    return {n: (t, float((outs[n] - first).abs().max())) for n, t in zip(ok, ms)} | failed


def _print(figures: dict) -> None:
    for name, (ms, err) in figures.items():
        print(f"  {name:<44} {ms:9.4f} ms   max abs difference {err:.2g}" if ms is not None
              else f"  {name:<44} failed: {err}", flush=True)


def stack_figures(a: argparse.Namespace) -> dict:
    torch.manual_seed(0)
    plain = _Stack(a.blocks, a.channels).to(a.device).eval()
    x = torch.randn(a.batch, a.channels, a.size, a.size, device=a.device)
    (x_cl,) = _channels_last_inputs((x,))

    def twin(channels_last: bool, **wrap) -> nn.Module:
        model = _Stack(a.blocks, a.channels).to(a.device).eval()
        model.load_state_dict(plain.state_dict())
        if channels_last:
            model, _ = _channels_last(model, ())
        if wrap:
            _wrap(model, x_cl if channels_last else x, a.wrapped, **wrap)
        return _compiled(model, a.device)

    named = {"eager": plain, "compiled": twin(False), "compiled, region ops": twin(False, keep_layout=False),
             "channels-last compiled": twin(True),
             "channels-last compiled, region ops": twin(True, keep_layout=False),
             "channels-last compiled, layout-keeping ops": twin(True, keep_layout=True)}
    inputs_of = {n: ((x_cl,) if n.startswith("channels-last") else (x,)) for n in named}
    return _timed(named, inputs_of, a.device)


def model_figures(path: str, device: str) -> dict:
    from foundry.extract.spec import load_spec
    torch.manual_seed(0)
    model, inputs = load_spec(path, device=device)
    model.eval()
    twin, _ = load_spec(path, device=device)
    twin.load_state_dict(model.state_dict())
    twin, cl_inputs = _channels_last(twin.eval(), inputs)
    named = {"eager": model, "compiled": torch.compile(model), "channels-last compiled": torch.compile(twin)}
    if device.startswith("cuda"):
        named["compiled, CUDA graphs"] = torch.compile(model, mode="reduce-overhead")
        named["channels-last compiled, CUDA graphs"] = torch.compile(twin, mode="reduce-overhead")
    inputs_of = {n: (cl_inputs if n.startswith("channels-last") else inputs) for n in named}
    return _timed(named, inputs_of, device)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--blocks", type=int, default=6)
    ap.add_argument("--wrapped", type=int, default=2, help="blocks made region ops (the middle ones)")
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--channels", type=int, default=256)
    ap.add_argument("--size", type=int, default=56, help="height and width of the activations")
    ap.add_argument("--model", nargs="*", default=[], help="KernelBench task files to time as they are and "
                                                            "channels-last")
    ap.add_argument("--json", help="write the figures here too")
    a = ap.parse_args(argv)
    if not 0 <= a.wrapped <= a.blocks:
        ap.error(f"--wrapped {a.wrapped}: give 0 to --blocks ({a.blocks})")
    where = torch.cuda.get_device_name() if a.device.startswith("cuda") else "cpu"
    report = {"torch": torch.__version__, "device": where, "stack": {}, "models": {}}
    print(f"torch {torch.__version__} on {where}", flush=True)
    report["stack"] = stack_figures(a)
    print(f"stack of {a.blocks} conv + BatchNorm + ReLU blocks ({a.batch} x {a.channels} x {a.size} x {a.size}), "
          f"{a.wrapped} of them region ops:")
    _print(report["stack"])
    for path in a.model:
        report["models"][path] = figures = model_figures(path, a.device)
        print(path)
        _print(figures)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
