"""CUDA outputs reach the judge device-to-device (CUDA IPC, copied on arrival), inputs are
generated on the GPU identically in separate processes, and full-size tasks are judged
on the GPU without host copies of their outputs."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "benchmarks" / "suite" / "level1"

EXPORTER = textwrap.dedent('''
    import json, sys, torch
    from foundry.evaluate import cuda_ipc
    pad = torch.empty(3 * 1024 * 1024 + 17, device="cuda")  # the output is not at its segment's start
    t = torch.arange(1 << 22, device="cuda", dtype=torch.float32)
    torch.cuda.synchronize()
    info = cuda_ipc.export(t[1000:])
    print(json.dumps(info), flush=True)
    sys.stdin.readline()          # the judge has copied it
    t.fill_(-1.0)                 # scribble over what was sent, then free it
    del t
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    print("scribbled", flush=True)
    sys.stdin.readline()
''')


@pytest.fixture
def exporter():
    p = subprocess.Popen([sys.executable, "-c", EXPORTER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True, cwd=str(ROOT))
    yield p
    p.kill()
    p.wait()


def test_ipc_copy_is_the_judges_own_and_survives_the_sender(exporter):
    import torch
    from foundry.evaluate.cuda_ipc import IpcImporter
    info = json.loads(exporter.stdout.readline())
    assert info is not None, "export failed"
    n = (1 << 22) - 1000
    imp = IpcImporter()
    [got] = imp.copy_out([{**info, "nbytes": n * 4, "dtype": torch.float32, "shape": [n]}])
    expected = torch.arange(1000, 1 << 22, device="cuda", dtype=torch.float32)
    assert got.is_cuda and torch.equal(got, expected)
    exporter.stdin.write("go\n")
    exporter.stdin.flush()
    assert exporter.stdout.readline().strip() == "scribbled"
    torch.cuda.synchronize()
    assert torch.equal(got, expected)  # a copy taken on arrival, not a view of the sender's memory
    exporter.stdin.write("end\n")
    exporter.stdin.flush()
    exporter.wait(timeout=30)
    assert torch.equal(got, expected)  # and the sender is gone


def test_an_output_declared_beyond_its_allocation_is_a_violation(exporter):
    import torch
    from foundry.evaluate.cuda_ipc import IpcImporter, IpcViolation
    info = json.loads(exporter.stdout.readline())
    with pytest.raises(IpcViolation, match="outside"):
        IpcImporter().copy_out([{**info, "nbytes": 1 << 34, "dtype": torch.uint8, "shape": [1 << 34]}])


def test_a_garbage_handle_is_refused_without_harm():
    import torch
    from foundry.evaluate.cuda_ipc import IpcError, IpcImporter
    imp = IpcImporter()
    with pytest.raises(IpcError):
        imp.copy_out([{"handle": "ab" * 64, "offset": 0, "nbytes": 16, "dtype": torch.uint8, "shape": [16]}])
    x = torch.ones(8, device="cuda")
    assert float((x * 2).sum()) == 16.0  # the judge's context is fine


GENERATE = textwrap.dedent('''
    import hashlib, sys, torch
    from foundry.evaluate.trial_inputs import make_trial_inputs
    from foundry.tasks import load_task
    from foundry.tasks.loader import build_module
    from foundry.tasks.inputs import InputSpec
    task = load_task(sys.argv[1], profile="full")
    (x,) = make_trial_inputs(build_module(task), InputSpec(int(sys.argv[2]), sys.argv[3]), "cuda")
    print(hashlib.blake2b(x.cpu().numpy().tobytes(), digest_size=16).hexdigest())
''')


@pytest.mark.parametrize("distribution", ["standard", "heavy"])
def test_device_inputs_are_bit_identical_in_separate_processes(distribution):
    import hashlib

    import torch
    from foundry.evaluate.trial_inputs import make_trial_inputs
    from foundry.tasks import load_task
    from foundry.tasks.inputs import InputSpec
    from foundry.tasks.loader import build_module
    task_path = SUITE / "08_ReLU.py"
    mine = make_trial_inputs(build_module(load_task(task_path, profile="full")), InputSpec(123457, distribution),
                             "cuda")[0]
    assert mine.is_cuda and mine.shape == (8192, 16384)
    theirs = subprocess.run([sys.executable, "-c", GENERATE, str(task_path), "123457", distribution],
                            capture_output=True, text=True, check=True, cwd=str(ROOT)).stdout.strip()
    assert hashlib.blake2b(mine.cpu().numpy().tobytes(), digest_size=16).hexdigest() == theirs
    other = make_trial_inputs(build_module(load_task(task_path, profile="full")), InputSpec(123458, distribution),
                              "cuda")[0]
    assert not torch.equal(mine, other)


@pytest.fixture(scope="module")
def full_judge(tmp_path_factory):
    from support.gpu_judge import gpu_eval_config
    from foundry.evaluate.evaluator import Evaluator
    ev = Evaluator(config=gpu_eval_config(trials=4, timeout_s=90.0,
                                          baseline_cache_dir=str(tmp_path_factory.mktemp("bl"))))
    yield ev
    ev.close()


def _judge(ev, source: str, stem: str = "08_ReLU"):
    from foundry.tasks import load_task
    from foundry.types import Candidate
    task = load_task(SUITE / f"{stem}.py", profile="full")
    return ev.evaluate(task=task, candidate=Candidate.make(task_id=task.task_id, source=source, backend="triton"))


def test_full_size_relu_is_judged_on_the_gpu_through_ipc(full_judge):
    import fullsize_candidates as fc
    r = _judge(full_judge, fc.RELU)
    assert r.correct, r.error[:600]
    m = r.metrics
    assert m["full_size_trials"] == 2 and m["trials_run"] == 4
    # 2 trials + the repeat + 2 timing sets, 512 MiB each, device to device; nothing large via the host
    assert m["transfer_bytes"]["cuda_ipc"] >= 5 * (512 << 20), m
    assert m["transfer_bytes"]["shm"] == 0 and m["transfer_bytes"]["inline"] < (4 << 20), m
    assert r.eval_s < 60


@pytest.mark.parametrize("name", ["UNINITIALISED_OUTPUT", "ALLOCATOR_RESULT_REUSE"])
def test_full_size_exploits_fail(full_judge, name):
    import fullsize_candidates as fc
    r = _judge(full_judge, getattr(fc, name))
    assert not r.correct, (r.flags, r.error[:300])


def test_full_size_softmax_passes(full_judge):
    import fullsize_candidates as fc
    r = _judge(full_judge, fc.SOFTMAX, "22_Softmax")
    assert r.correct, r.error[:600]
