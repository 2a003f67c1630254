"""The CPU workers' malloc policy: an output allocated and freed on every call faults its
pages in once, not on every call (page faults were a large, varying share of CPU timings)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

from foundry.evaluate.worker_env import CPU_MALLOC_POLICY, worker_env

CALLS = """
import json, resource, torch
faults = []
for _ in range(6):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    out = torch.empty(1 << 20)  # 4 MiB, an output the size of the suite's small tasks
    out.fill_(1.0)
    del out
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps(faults))
"""


def test_cpu_workers_get_the_policy():
    env = worker_env("cpu", threads=1)
    for name, value in CPU_MALLOC_POLICY.items():
        assert env[name] == value
    assert not set(CPU_MALLOC_POLICY) & set(worker_env("cuda", threads=1))


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="settings of glibc's malloc")
def test_a_buffer_freed_every_call_is_not_faulted_in_again():
    env = {**os.environ, **worker_env("cpu", threads=1)}
    out = subprocess.run([sys.executable, "-c", CALLS], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    faults = json.loads(out.stdout.strip().splitlines()[-1])
    pages = (4 << 20) // os.sysconf("SC_PAGE_SIZE")
    # the first call maps the buffer; the next five reuse it (without the policy the buffer
    # came from fresh pages on most calls on a 2-core VM: `pages` faults each)
    assert sum(faults[1:]) < pages // 4, faults
