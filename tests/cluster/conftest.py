"""Tests on a Ray cluster of several nodes on one machine (benchmarks/local_cluster.py).

They fit the one-Ray-instance-per-test-session rule by never joining Ray from the test
process: each node is a `ray start --block` process group of its own, every Ray client
(the main job, `ray job submit`) is a subprocess, and the fixtures stop every node they
started when the module ends, failed or not. Ports sit in 23400-25999, below the
kernel's ephemeral range and away from Ray's defaults.
"""

from __future__ import annotations

import pytest

from support.benchmark_script import load_benchmark

@pytest.fixture(scope="module")
def local_cluster_module():
    return load_benchmark("local_cluster")
