"""Unit tests of the judge's pure parts: channel, secrets, comparison, timing report,
inputs, static checks."""

from __future__ import annotations

import os
import struct

import pytest
import torch

from foundry.evaluate import output_tree, protocol
from foundry.evaluate.backends import get_backend
from foundry.evaluate.compare import compare
from foundry.evaluate.secrets import Scrubber, clean_env, truncate
from foundry.evaluate.static_checks import check_source
from foundry.evaluate.timing_report import analyze
from foundry.tasks.inputs import InputSpec, make_inputs, trial_plan


# ------------------------------------------------------------------ channel
def _roundtrip(data: bytes):
    r, w = os.pipe()
    os.write(w, data)
    os.close(w)
    try:
        return protocol.Reader(r, max_bytes=1 << 20).read(deadline=1e18)
    finally:
        os.close(r)


def test_channel_roundtrip_of_an_output_tree():
    t = [torch.randn(3, 4), torch.arange(5, dtype=torch.int64), torch.randn(2).to(torch.bfloat16)]
    tensors: list = []
    tree = output_tree.encode_tree((t[0], [t[1], {"x": t[2]}], 1.5, None), tensors)
    header, got = _roundtrip(protocol.pack({"kind": "trial", "tree": tree}, tensors))
    out = output_tree.decode_tree(header["tree"], got)
    assert torch.equal(out[0], t[0]) and torch.equal(out[1][0], t[1]) and torch.equal(out[1][1]["x"], t[2])
    assert out[2] == 1.5 and out[3] is None


@pytest.mark.parametrize("data", [
    b"XXX" + b"\0" * 10,  # bad magic
    b"KF1" + struct.pack("<I", 5) + b"nope!",  # not JSON
    b"KF1" + struct.pack("<I", 9) + b"[1, 2, 3]",  # not an object
])
def test_malformed_frames_are_protocol_errors(data):
    with pytest.raises(protocol.ProtocolError):
        _roundtrip(data)


def test_tensor_size_must_match_its_shape():
    head = b'{"tensors": [{"dtype": "float32", "shape": [4], "nbytes": 8}]}'
    with pytest.raises(protocol.ProtocolError, match="size"):
        _roundtrip(b"KF1" + struct.pack("<I", len(head)) + head + b"\0" * 8)


def test_closed_channel_and_bad_trees():
    with pytest.raises(protocol.ChannelClosed):
        _roundtrip(b"")
    with pytest.raises(protocol.ProtocolError):
        output_tree.decode_tree({"t": "tensor", "i": 3}, [])
    with pytest.raises(protocol.ProtocolError):
        output_tree.decode_tree({"t": "pickle", "data": "..."}, [])


# ------------------------------------------------------------------ secrets
def test_clean_env_strips_secret_names_and_configured_names():
    env = {"OPENAI_API_KEY": "a", "HF_TOKEN": "b", "DB_PASSWORD": "c", "MY_SECRET": "d",
           "CUSTOM": "e", "PATH": "/bin"}
    assert clean_env(env, ["CUSTOM"]) == {"PATH": "/bin"}


def test_scrubber_removes_plain_and_encoded_values():
    import base64
    s = Scrubber(["sk-verysecret-123"])
    text = f"a sk-verysecret-123 b {base64.b64encode(b'sk-verysecret-123').decode()} c {'sk-verysecret-123'[::-1]}"
    out = s(text)
    assert "verysecret" not in out and "terces" not in out and out.count("[redacted]") == 3


def test_truncate_keeps_head_and_tail():
    t = truncate("H" * 100 + "x" * 10000 + "TAIL", 500)
    assert len(t) < 600 and t.startswith("H") and t.endswith("TAIL")


# ------------------------------------------------------------------ comparison
def test_compare_kinds():
    ref = torch.randn(4, 5)
    assert compare(ref, ref.clone()).ok
    assert compare(ref, ref + 1e-6).ok
    assert compare(ref, ref + 1e-2).kind == "value"
    assert compare(ref, ref.reshape(20)).kind == "shape"
    assert compare(ref, ref.double()).kind == "shape"
    bad = ref.clone()
    bad[0, 0] = float("nan")
    c = compare(ref, bad)
    assert c.kind == "value" and c.non_finite
    assert compare((ref, ref), [ref]).kind == "shape"
    assert compare(torch.tensor([1, 2]), torch.tensor([1, 3])).kind == "value"


def test_compare_tolerance_scales_with_output_size():
    ref = torch.randn(1000) * 1e4
    assert compare(ref, ref * (1 + 1e-5)).ok
    assert not compare(ref, ref * (1 + 1e-2)).ok


# ------------------------------------------------------------------ timing report
def _report(blocks_ms, per=10):
    return {"block_ns": [int(b * 1e6) for b in blocks_ms], "calls_per_block": per}


def test_timing_report_median_and_spread():
    v = analyze(_report([10, 10, 11, 10, 12]), started_at=0.0, ended_at=0.0535)
    assert v.flags == () and v.runtime_ms == pytest.approx(1.0) and v.spread is not None


def test_timing_report_flags_hidden_time_and_skewed_blocks():
    hidden = analyze(_report([1, 1, 1, 1, 1]), started_at=0.0, ended_at=0.5)
    assert "timing_mismatch" in hidden.flags
    skewed = analyze(_report([0.1, 0.1, 0.1, 0.1, 100]), started_at=0.0, ended_at=0.101)
    assert "timing_mismatch" in skewed.flags
    noisy = analyze(_report([1, 1, 1, 8, 9]), started_at=0.0, ended_at=0.0205)
    assert noisy.flags == () and noisy.runtime_ms == pytest.approx(0.4)  # the mean, not the median
    assert "timing_mismatch" in analyze({"block_ns": "x"}, started_at=0.0, ended_at=1.0).flags
    assert "timing_mismatch" in analyze(_report([1] * 5), started_at=None, ended_at=1.0).flags


# ------------------------------------------------------------------ inputs
class _Task:
    N = 64

    @staticmethod
    def get_inputs():
        return [torch.randn(_Task.N), torch.rand(_Task.N), torch.randint(0, 5, (3,))]


def test_inputs_are_seeded_and_heavy_tailed_keeps_signs():
    a = make_inputs(_Task, InputSpec(5))
    b = make_inputs(_Task, InputSpec(5))
    c = make_inputs(_Task, InputSpec(6))
    assert all(torch.equal(x, y) for x, y in zip(a, b)) and not torch.equal(a[0], c[0])
    h = make_inputs(_Task, InputSpec(5, "heavy"))
    assert torch.equal(torch.sign(h[0]), torch.sign(a[0])) and (h[1] >= 0).all()
    assert h[0].abs().max() > 3 * a[0].abs().max() or h[0].abs().max() > 20
    assert torch.equal(h[2], a[2])  # integer inputs unchanged
    plan = trial_plan(4, 1)
    assert len({p.seed for p in plan}) == 4 and {p.distribution for p in plan} == {"standard", "heavy"}
    with pytest.raises(ValueError, match="distribution"):
        InputSpec(1, "cauchy")


# ------------------------------------------------------------------ static checks
HONEST_C = '''
import torch
import torch.nn as nn
from foundry.kernels import c
SRC = r"""
#include <stdint.h>
void relu(const float* x, float* y, int64_t n) { for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] : 0; }
"""
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.lib = c.build(SRC)
        self.w = nn.Parameter(torch.randn(4))
    def forward(self, x):
        y = torch.empty_like(x.contiguous())
        self.lib.relu(x, y, x.numel())
        return y.view(x.shape)
'''


def _flags(src, backend="c", **kw):
    return set(check_source(src, backend=get_backend(backend), **kw).flags)


def test_honest_source_has_no_flags():
    assert _flags(HONEST_C) == set()


@pytest.mark.parametrize("snippet,flag", [
    ("import time\n", "timer_tampering"),
    ("import gc\nx = gc.get_objects()\n", "introspection"),
    ("import torch\ntorch.allclose = lambda *a, **k: True\n", "monkeypatch"),
    ("import os\nos._exit(0)\n", "process_control"),
    ("import threading\n", "threads"),
    ("import os\nk = os.environ\n", "env_access"),
    ("import torch\ntorch.use_deterministic_algorithms(False)\n", "torch_patching"),
    ("from foundry.kernels import record_launch\n", "launch_tampering"),
    ("fast = torch.compile(f)\n", "runtime_compile"),
    ("from torch import compile as c\n", "runtime_compile"),
    ("import torch._inductor.compile_fx\n", "runtime_compile"),
    ("f = getattr(torch, 'compile')\n", "runtime_compile"),
    ("m = torch.jit.script(m)\n", "runtime_compile"),
    ("open('/srv/x.py', 'w').write('')\n", "file_access"),
    ("import numpy as np\n", "foreign_compute"),
    ("m = __import__('ti' + 'me')\n", "obfuscation"),
    ("import torch\nf = getattr(torch, '_' + 'C')\n", "obfuscation"),
    ("exec('x = 1')\n", "obfuscation"),
    ("def f(x):\n    return x.numpy()\n", "foreign_compute"),
    ("import pathlib\npathlib.Path('a').write_text('b')\n", "file_access"),
    ("def f(x):\n    return x.half()\n", "precision_drop"),
    ("def f(a, b):\n    return tl.dot(a, b, input_precision='tf32')\n", "precision_drop"),
    ("def f(a, b):\n    return tl.dot(a, b, allow_tf32=True)\n", "precision_drop"),
    ("PARAMS = {'F32_DOT': 'tf32'}\n", "precision_drop"),
    ("def f(x):\n    try:\n        pass\n    except Exception:\n        return x\n", "torch_fallback"),
    ("import torch\ndef f(a, b):\n    return torch.softmax(a, 1)\n", "torch_compute"),
    ("import foundry.evaluate.cpu_timing as t\n", "judge_access"),
    ("def f(a, b):\n    return a.softmax(-1)\n", "torch_compute"),
    ("def f(x):\n    return Model()(x)\n", "reference_call"),
])
def test_static_guard_fires(snippet, flag):
    assert flag in _flags(HONEST_C + "\n" + snippet)


def test_no_kernel_and_allowances():
    pure = "import torch\nimport torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"
    assert {"no_kernel", "torch_compute"} <= _flags(pure)
    assert _flags(pure, allow_torch_ops=True) == set()
    assert "precision_drop" not in _flags(HONEST_C + "\ny = 1 if True else x.half()\n",
                                          task_source="x = torch.randn(3).half()")
    assert check_source("def (:", backend=get_backend("c")).syntax_error


def test_torch_views_and_copies_are_no_compute_to_the_static_check_either():
    # one list (movement_ops) for the static check and the worker's op recorder
    for call in ("torch.flatten(x, 1)", "torch.reshape(x, (-1,))", "torch.permute(x, (1, 0))",
                 "torch.unsqueeze(x, 0)", "torch.clone(x)"):
        assert "torch_compute" not in _flags(HONEST_C + f"\ndef f(x):\n    return {call}\n"), call
    assert "torch_compute" in _flags(HONEST_C + "\ndef f(x):\n    return torch.cumsum(x, 0)\n")


def test_a_tensor_clone_is_no_thread_but_the_c_clone_call_is():
    assert "threads" not in _flags(HONEST_C + "\ndef f(x):\n    return x.clone().detach()\n")
    assert "threads" in _flags(HONEST_C + '\nSRC = r"""int f(void) { return clone(g, s, 0, 0); }"""\n')


def test_getattr_with_a_literal_name_is_no_obfuscation_however_it_is_spaced():
    # torch.fx writes a numbered submodule as getattr(self.stages, "0"): a fixed name
    for line in ('m = getattr(self.stages, "0").conv(x)\n', "m = getattr(self.stages,'0')\n",
                 'w = getattr(self.stages,  "0.conv", None)\n'):
        assert "obfuscation" not in _flags(HONEST_C + "\n" + line), line
    for line in ("f = getattr(torch,  '_' + 'C')\n", "f = getattr(torch, NAME)\n"):
        assert "obfuscation" in _flags(HONEST_C + "\n" + line), line


def test_the_split_float32_product_is_no_precision_drop():
    # "tf32x3" keeps float32's tolerance (three TF32 products of split operands); the
    # correctness trials, not this check, judge how close it comes
    assert "precision_drop" not in _flags(HONEST_C + "\nPARAMS = {'F32_DOT': 'tf32x3'}\n")


def test_triton_kernel_bodies_are_not_torch_compute():
    src = ('import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n'
           '@triton.jit\ndef k(x_ptr, n, B: tl.constexpr):\n    v = tl.load(x_ptr + tl.arange(0, B))\n'
           '    tl.store(x_ptr, tl.sum(tl.exp(v), axis=0))\n'
           'class ModelNew(nn.Module):\n    def forward(self, x):\n        k[(1,)](x, 1, B=16)\n        return x\n')
    assert _flags(src, backend="triton") == set()


def test_library_gemm_calls_are_left_to_the_dynamic_check():
    src = HONEST_C.replace("self.w = nn.Parameter(torch.randn(4))", "self.lin = nn.Linear(4, 4)").replace(
        "y = torch.empty_like(x.contiguous())", "x = self.lin(x) + 0 if False else self.lin(x)\n        y = torch.empty_like(x)")
    assert "torch_compute" not in _flags(src)
    assert "torch_compute" not in _flags(HONEST_C + "\ndef f(a, b):\n    return torch.mm(a, b) if a is None else a @ b\n")


def test_input_changes_between_blocks_count_in_the_window_up_to_the_blocks_own_time():
    blocks = [int(1e6)] * 50  # 50 ms of reported runs
    header = {"block_ns": blocks, "calls_per_block": 3}
    # the worker also spent 40 ms changing inputs between blocks: a 95 ms window is honest
    assert "timing_mismatch" not in analyze({**header, "input_change_ns": int(40e6)}, started_at=0.0,
                                            ended_at=0.095).flags
    assert "timing_mismatch" in analyze(header, started_at=0.0, ended_at=0.2).flags  # 150 ms unaccounted
    # claiming the missing time as input changes buys at most the blocks' own total
    assert "timing_mismatch" in analyze({**header, "input_change_ns": int(500e6)}, started_at=0.0,
                                        ended_at=0.2).flags


def test_with_input_changes_a_block_calls_each_set_once_at_most():
    from foundry.evaluate.cpu_timing import MAX_CHANGED_BLOCKS, plan_blocks
    params = {"block_ms": 10.0, "min_calls": 20, "min_ms": 200.0, "max_calls": 100000}
    assert plan_blocks(10e3, params) == (1000, 20)  # 10 us calls: blocks of 1000 calls on the same sets
    per_block, n_blocks = plan_blocks(10e3, params, max_per_block=3)
    assert per_block == 3 and n_blocks == min(MAX_CHANGED_BLOCKS, 6667)
    assert plan_blocks(20e6, params, max_per_block=3) == (1, 20)  # 20 ms calls: one a block already
