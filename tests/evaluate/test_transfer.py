"""Large outputs from the worker to the judge through the job's shared result file (CPU),
trial plans of large tasks, and the host-memory cap's error."""

from __future__ import annotations

import json
import mmap
import os
import struct
import textwrap
import time
from pathlib import Path

import pytest
import torch

from foundry.evaluate import EvalConfig, Evaluator, output_tree, protocol
from foundry.evaluate.static_checks import StaticReport
from foundry.tasks import load_task
from foundry.types import Candidate, Stage

ROOT = Path(__file__).resolve().parents[2]
HONEST = (ROOT / "tests" / "exploits" / "candidates" / "honest_relu_c.py").read_text()
MiB = 1 << 20


@pytest.fixture
def channel():
    """(worker Channel, judge Reader, shm fd, pipe fds) on a 64 MiB result file."""
    shm = protocol.make_result_file(64 * MiB)
    assert shm >= 0, "memfd with seals is available on Linux"
    r, w = os.pipe()
    os.set_blocking(w, True)
    worker = protocol.Channel(w, shm_fd=shm)
    reader = protocol.Reader(r, max_bytes=64 * MiB, shm_fd=shm)
    yield worker, reader, shm, (r, w)
    for fd in (r, w, shm):
        os.close(fd)


def _read(reader):
    return reader.read(time.monotonic() + 10)


def test_large_tensors_go_through_the_result_file_and_small_ones_inline(channel):
    worker, reader, _, _ = channel
    big = torch.randn(1 << 20)  # 4 MiB
    small = torch.arange(10)
    tensors: list = []
    tree = output_tree.encode_tree([big, small], tensors)
    # the pipe holds 64 KiB: a 4 MiB inline frame would block this single-threaded test
    worker.send({"kind": "trial", "tree": tree}, tensors)
    header, got = _read(reader)
    out = output_tree.decode_tree(header["tree"], got)
    assert torch.equal(out[0], big) and torch.equal(out[1], small)
    assert reader.routes["shm"] == big.numel() * 4 and reader.routes["inline"] == small.numel() * 8
    assert reader.piped < 4096  # only the header and the small tensor crossed the pipe


def test_the_judge_keeps_what_arrived_when_the_worker_rewrites_its_region(channel):
    worker, reader, shm, _ = channel
    t = torch.full((1 << 18,), 3.0)
    worker.send({"kind": "trial"}, [t])
    _, got = _read(reader)
    mm = mmap.mmap(shm, 64 * MiB)  # the worker scribbles over everything afterwards
    mm[:] = b"\x00" * (64 * MiB)
    mm.close()
    assert torch.equal(got[0], t)


def test_the_result_file_cannot_shrink_or_grow(channel):
    _, _, shm, _ = channel
    with pytest.raises(OSError):
        os.ftruncate(shm, 0)  # a truncated file under the judge's read would fail it
    with pytest.raises(OSError):
        os.ftruncate(shm, 128 * MiB)


def _forged(w: int, metas: list) -> None:
    head = json.dumps({"kind": "trial", "tensors": metas}).encode()
    os.write(w, protocol.MAGIC + struct.pack("<I", len(head)) + head)


@pytest.mark.parametrize("metas, why", [
    # two messages naming the same region: a second answer cannot alias the first
    ([{"dtype": "float32", "shape": [1 << 16], "nbytes": 1 << 18, "shm": 0}], "out of order"),
    ([{"dtype": "float32", "shape": [1 << 23], "nbytes": 1 << 25, "shm": 48 << 20}], "out of bounds"),
    ([{"dtype": "float32", "shape": [4], "nbytes": 16, "shm": -64}], "out of order"),
    ([{"dtype": "float32", "shape": [4], "nbytes": 16, "cuda_ipc": {"handle": "00" * 64, "offset": 0}}],
     "unexpected CUDA IPC"),
])
def test_forged_shared_regions_are_protocol_violations(channel, metas, why):
    worker, reader, _, (_, w) = channel
    worker.send({"kind": "trial"}, [torch.ones(1 << 16)])  # region [0, 256 KiB)
    _read(reader)
    _forged(w, metas)
    with pytest.raises(protocol.ProtocolError, match=why):
        _read(reader)


def test_without_a_result_file_everything_is_inline():
    r, w = os.pipe()
    try:
        worker = protocol.Channel(w)
        t = torch.randn(4096)  # 16 KiB: fits the pipe
        worker.send({"kind": "trial"}, [t])
        reader = protocol.Reader(r, max_bytes=MiB)
        _, got = _read(reader)
        assert torch.equal(got[0], t) and reader.routes["inline"] == t.numel() * 4
    finally:
        os.close(r)
        os.close(w)


# ------------------------------------------------------------------ end to end
TASK = '''
import torch
import torch.nn as nn

N = 2048
D = 4096
SMALL_SIZES = {"N": 8, "D": 1000}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(N, D)]


def get_init_inputs():
    return []
'''

# writes garbage over the whole result file on every call after the first, and answers
# the repeated first input with garbage too: the judge must judge what it received
SCRIBBLER = HONEST.replace("class ModelNew(nn.Module):", textwrap.dedent('''
    import mmap as _mm
    import os as _os
    CALLS = [0]


    def _scribble():
        for name in _os.listdir("/proc/self/fd"):
            try:
                if "foundry-results" in _os.readlink("/proc/self/fd/" + name):
                    fd = int(name)
                    size = min(_os.fstat(fd).st_size, 256 << 20)
                    m = _mm.mmap(fd, size)
                    m[:] = b"\\x7f" * size
                    m.close()
            except OSError:
                pass


    class ModelNew(nn.Module):''')).replace('''        self.lib.relu_kernel(x, y, x.numel())
        return y''', '''        self.lib.relu_kernel(x, y, x.numel())
        CALLS[0] += 1
        if CALLS[0] > 1:
            _scribble()
        if CALLS[0] == 5:  # 2 full-size trials, 2 small ones, then the repeat of trial 0
            y.fill_(7.0)
        return y''')


@pytest.fixture(scope="module")
def big_task(tmp_path_factory):
    path = tmp_path_factory.mktemp("tasks") / "big_relu.py"
    path.write_text(TASK)
    return load_task(path, profile="full")  # 32 MiB in, 32 MiB out per trial


@pytest.fixture(scope="module")
def big_ev(tmp_path_factory):
    ev = Evaluator(config=EvalConfig.from_config({
        "trials": 4, "timeout_s": 60, "compile_baseline": False, "timing_min_ms": 20,
        "timing_min_calls": 3, "warmup_ms": 0, "large_task_mb": 32, "memory_mb": 1024,
        "baseline_cache_dir": str(tmp_path_factory.mktemp("baselines"))}))
    yield ev
    ev.close()


def test_large_task_runs_two_full_size_trials_and_the_rest_small_through_shared_memory(big_ev, big_task):
    r = big_ev.evaluate(task=big_task, candidate=Candidate.make(task_id=big_task.task_id, source=HONEST,
                                                                backend="c"))
    assert r.correct, r.error
    m = r.metrics
    assert m["full_size_trials"] == 2 and m["trials_run"] == 4  # 2 full + 2 at SMALL_SIZES
    # 2 trials + the repeat + 2 timing sets of 32 MiB each came through the result file
    assert m["transfer_bytes"]["shm"] >= 5 * 32 * MiB
    assert m["transfer_bytes"]["inline"] < MiB
    assert m["memory_cap_mb"] > 1024 + 5 * 32  # raised by what this task needs on the host


def test_a_worker_that_scribbles_over_sent_outputs_cannot_change_the_verdict(big_ev, big_task, monkeypatch):
    import foundry.evaluate.evaluator as module
    monkeypatch.setattr(module, "check_source", lambda *a, **k: StaticReport())  # runtime guards only
    r = big_ev.evaluate(task=big_task, candidate=Candidate.make(task_id=big_task.task_id, source=SCRIBBLER,
                                                                backend="c"))
    assert not r.correct
    # the trials' outputs, as received, were right; only the repeat's answer differs
    assert r.stage == Stage.VALUE and r.flags == ("nondeterministic",), (r.flags, r.error[:400])
    assert r.max_abs_err == 0.0


def test_the_memory_cap_names_itself_when_it_fires(tmp_path_factory, big_task):
    hog = HONEST.replace("        y = torch.empty_like(x)\n",
                         "        y = torch.empty_like(x)\n        HOG.append(torch.ones(64 << 20))\n"
                         ).replace("class ModelNew", "HOG = []\n\n\nclass ModelNew")
    ev = Evaluator(config=EvalConfig.from_config({
        "trials": 2, "timeout_s": 60, "compile_baseline": False, "large_task_mb": 4096,
        "memory_mb": 600, "baseline_cache_dir": str(tmp_path_factory.mktemp("bl"))}))
    try:
        ev._sizes[big_task.source_hash] = (0, 0)  # no scaling: the configured cap holds
        ev._task_setup(big_task)
        ev._sizes[big_task.source_hash] = (0, 0)
        r = ev.evaluate(task=big_task, candidate=Candidate.make(task_id=big_task.task_id, source=hog,
                                                                backend="c"))
    finally:
        ev.close()
    assert not r.correct
    assert "host-memory cap of 600 MB" in r.error and "memory_mb" in r.error, r.error[:300]


# ------------------------------------------------------------------ device-side pieces, on the CPU
def test_device_generation_path_is_deterministic_heavy_tailed_and_seed_dependent():
    from foundry.evaluate.trial_inputs import generate_on, small_sizes, tensor_bytes
    from foundry.tasks.inputs import InputSpec
    from foundry.tasks.loader import build_module
    task = load_task(ROOT / "benchmarks" / "smoke" / "softmax.py")
    module = build_module(task)
    cpu = torch.device("cpu")
    a = generate_on(module, InputSpec(11, "heavy"), cpu)
    b = generate_on(module, InputSpec(11, "heavy"), cpu)
    c = generate_on(module, InputSpec(12, "heavy"), cpu)
    s = generate_on(module, InputSpec(11, "standard"), cpu)
    assert torch.equal(a[0], b[0]) and not torch.equal(a[0], c[0])
    assert torch.equal(torch.sign(a[0]), torch.sign(s[0]))  # signs kept, magnitudes spread
    assert a[0].abs().max() > 10 * s[0].abs().max()
    assert tensor_bytes(a) == a[0].numel() * 4
    assert small_sizes(task) == {"batch_size": 16, "dim": 1024}


class _FakeImporter:
    def __init__(self, fail=None):
        self.fail, self.calls = fail, []

    def copy_out(self, items):
        self.calls.append(items)
        if self.fail is not None:
            raise self.fail
        return [torch.zeros(it["shape"], dtype=it["dtype"]) for it in items]


def _ipc_meta(n=16):
    return [{"dtype": "float32", "shape": [n], "nbytes": 4 * n, "cuda_ipc": {"handle": "ab" * 64, "offset": 0}}]


def test_ipc_tensors_are_copied_on_arrival_and_acknowledged():
    r, w = os.pipe()
    try:
        imp = _FakeImporter()
        reader = protocol.Reader(r, max_bytes=MiB, importer=imp)
        _forged(w, _ipc_meta())
        header, got = _read(reader)
        assert header["kind"] == "trial" and got[0].shape == (16,) and reader.ack == b"a"
        assert imp.calls[0][0]["nbytes"] == 64 and reader.routes["cuda_ipc"] == 64
    finally:
        os.close(r)
        os.close(w)


def test_ipc_that_cannot_work_here_asks_for_the_host_route_and_a_violation_fails():
    from foundry.evaluate.cuda_ipc import IpcError, IpcViolation
    r, w = os.pipe()
    try:
        reader = protocol.Reader(r, max_bytes=MiB, importer=_FakeImporter(IpcError("no driver")))
        _forged(w, _ipc_meta())
        assert _read(reader) == (None, []) and reader.ack == b"n" and "no driver" in reader.ipc_error
        reader = protocol.Reader(r, max_bytes=MiB, importer=_FakeImporter(IpcViolation("outside")))
        _forged(w, _ipc_meta())
        with pytest.raises(protocol.ProtocolError, match="outside"):
            _read(reader)
    finally:
        os.close(r)
        os.close(w)


def test_streamed_comparison_matches_the_whole_tensor_rules():
    from foundry.evaluate import compare as cmp
    ref = torch.randn(3 * cmp.CHUNK_CPU + 5)
    assert cmp.compare(ref, ref * (1 + 1e-5)).ok
    bad = ref.clone()
    bad[-1] += 1.0  # one element in the last slice
    c = cmp.compare(ref, bad)
    assert c.kind == "value" and c.max_abs_err == pytest.approx(1.0, rel=1e-5)
    nan = ref.clone()
    nan[cmp.CHUNK_CPU + 1] = float("nan")
    c = cmp.compare(ref, nan)
    assert c.kind == "value" and c.non_finite
    both = ref.clone()
    both[7] = float("inf")
    assert cmp.compare(both, both.clone()).ok
    other = both.clone()
    other[7] = float("-inf")
    assert cmp.compare(both, other).kind == "value"


def test_cuda_ipc_handles_keep_every_byte_including_zeros():
    from foundry.evaluate import cuda_ipc
    raw = bytes([0, 1, 0, 0, 255] + list(range(59)))
    h = cuda_ipc.handle_from_hex(raw.hex())
    assert cuda_ipc.handle_to_hex(h) == raw.hex()
    with pytest.raises(ValueError):
        cuda_ipc.handle_from_hex("00" * 63)


def test_large_task_settings_keep_a_heavy_tailed_full_size_trial():
    with pytest.raises(ValueError, match="full_size_trials"):
        EvalConfig.from_config({"full_size_trials": 1})
    with pytest.raises(ValueError, match="large_task_mb"):
        EvalConfig.from_config({"large_task_mb": 0})
