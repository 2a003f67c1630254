"""A Ray cluster of several nodes on one machine, each node a `ray start --block` of its
own (its own raylet, ports and logical CPUs/GPUs), the way Ray itself tests multi-node
behaviour. Used by tests/cluster/ and benchmarks/cluster_scaling.py; also a script:

    python benchmarks/local_cluster.py --workers 2 --gpus-per-worker 2
    # prints the address; then, in another shell:
    python -m foundry +exp=smoke ray.address=127.0.0.1:46400 ...
    # Ctrl-C stops every node it started

Each node runs in a session of its own (`start_new_session`), so removing a node
(`remove`, SIGKILL to every process of its session: its raylet and every worker process
on it) and the final `shutdown` touch only the processes this cluster started; nothing calls `ray stop`, which would stop
every Ray node of the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HEAD_PORTS = 20  # gcs, client server, dashboard, dashboard grpc ... at the base of the range
NODE_PORTS = 200  # per node: 10 fixed ports, then 100 for its worker processes
# the head's GCS declares a node dead after 3 missed health checks a second apart (default ~15 s)
FAST_FAILURE = {"health_check_period_ms": 1000, "health_check_failure_threshold": 3,
                "health_check_timeout_ms": 1000}


@dataclass
class LocalNode:
    name: str
    proc: subprocess.Popen
    log: Path
    gpus: int
    cpus: int
    head: bool = False

    @property
    def pid(self) -> int:
        return self.proc.pid


@dataclass
class LocalCluster:
    base_port: int = 46400
    temp_dir: Path | None = None
    object_store_mb: int = 100
    system_config: dict = field(default_factory=lambda: dict(FAST_FAILURE))
    dashboard: bool = False
    env: dict = field(default_factory=dict)  # extra environment of every node (and its workers)
    token: str = field(default_factory=lambda: secrets.token_hex(16))  # the cluster's own auth token
    nodes: list[LocalNode] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._own_temp_dir = self.temp_dir is None
        if self.temp_dir is None:
            self.temp_dir = Path(tempfile.mkdtemp(prefix="kf-ray-"))
        self.temp_dir = Path(self.temp_dir)
        self.temp_dir.mkdir(parents=True, exist_ok=True)

    def client_env(self, base: dict | None = None) -> dict:
        """The environment of a process that talks to this cluster (a driver, `ray job
        submit`): token authentication with this cluster's token, RAY_ADDRESS set (what
        `ray.address=auto` joins)."""
        env = dict(os.environ if base is None else base)
        env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=self.token, RAY_ADDRESS=self.address,
                   RAY_USAGE_STATS_ENABLED="0")
        env.pop("RAY_AUTH_TOKEN_PATH", None)
        return env

    # -- addresses ----------------------------------------------------------
    @property
    def gcs_port(self) -> int:
        return self.base_port

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.gcs_port}"

    @property
    def dashboard_url(self) -> str:
        return f"http://127.0.0.1:{self.base_port + 2}"

    def _node_ports(self, k: int) -> list[str]:
        base = self.base_port + HEAD_PORTS + NODE_PORTS * k
        return [f"--node-manager-port={base}", f"--object-manager-port={base + 1}",
                f"--dashboard-agent-listen-port={base + 2}", f"--dashboard-agent-grpc-port={base + 3}",
                f"--metrics-export-port={base + 4}", f"--runtime-env-agent-port={base + 5}",
                f"--min-worker-port={base + 100}", f"--max-worker-port={base + 199}"]

    # -- nodes --------------------------------------------------------------
    def _start(self, name: str, args: list[str], *, cpus: int, gpus: int, head: bool) -> LocalNode:
        log = self.temp_dir / f"{name}.log"
        cmd = [sys.executable, "-m", "ray.scripts.scripts", "start", "--block", "--disable-usage-stats",
               "--node-ip-address=127.0.0.1", f"--num-cpus={cpus}", f"--num-gpus={gpus}",
               f"--object-store-memory={self.object_store_mb * 1024 * 1024}",
               *self._node_ports(len(self.nodes)), *args]
        env = {**self.client_env(), **self.env}
        env.pop("RAY_ADDRESS", None)
        with open(log, "w") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        node = LocalNode(name=name, proc=proc, log=log, gpus=gpus, cpus=cpus, head=head)
        self.nodes.append(node)
        return node

    def start_head(self, *, cpus: int = 1, gpus: int = 0) -> LocalNode:
        args = ["--head", f"--port={self.gcs_port}", f"--ray-client-server-port={self.base_port + 1}",
                f"--temp-dir={self.temp_dir}", f"--system-config={json.dumps(self.system_config)}"]
        if self.dashboard:
            args += ["--include-dashboard=true", "--dashboard-host=127.0.0.1",
                     f"--dashboard-port={self.base_port + 2}"]
        else:
            args += ["--include-dashboard=false"]
        node = self._start("head", args, cpus=cpus, gpus=gpus, head=True)
        self.wait_for_nodes(1)
        return node

    def add_worker(self, *, cpus: int = 1, gpus: int = 0, wait: bool = True) -> LocalNode:
        node = self._start(f"worker-{len(self.nodes)}", [f"--address={self.address}"], cpus=cpus, gpus=gpus,
                           head=False)
        if wait:
            self.wait_for_nodes(sum(1 for n in self.nodes if n.proc.poll() is None))
        return node

    def remove(self, node: LocalNode, sig: int = signal.SIGKILL) -> None:
        """The node goes away at once: its raylet and every process on it get `sig`."""
        _signal_session(node.proc.pid, sig)
        try:
            node.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            _signal_session(node.proc.pid, signal.SIGKILL)
            node.proc.wait(timeout=10)

    def alive_nodes(self) -> int:
        """Nodes the head's GCS counts alive (asked in a fresh process, so this one holds
        no Ray connection)."""
        code = ("import ray, sys; ray.init(address=sys.argv[1], log_to_driver=False, configure_logging=False);"
                "print(sum(1 for n in ray.nodes() if n['Alive']))")
        try:
            out = subprocess.run([sys.executable, "-c", code, self.address], capture_output=True, text=True,
                                 timeout=30, env=self.client_env())
        except subprocess.TimeoutExpired:  # the head is not answering yet
            return 0
        try:
            return int(out.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return 0

    def wait_for_nodes(self, count: int, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for node in self.nodes:
                if node.proc.poll() is not None and node.proc.returncode not in (None, -9, -15):
                    raise RuntimeError(f"{node.name} exited {node.proc.returncode}: {node.log.read_text()[-2000:]}")
            if self.alive_nodes() >= count:
                return
            time.sleep(1.0)
        raise TimeoutError(f"the cluster did not reach {count} alive node(s) in {timeout:g} s")

    def shutdown(self) -> None:
        """Stop every node this cluster started, workers first, then the head."""
        for node in sorted(self.nodes, key=lambda n: n.head):
            if node.proc.poll() is None:
                try:
                    os.killpg(node.proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        deadline = time.monotonic() + 5
        for node in self.nodes:
            try:
                node.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            _signal_session(node.proc.pid, signal.SIGKILL)  # whatever is left of it
            if node.proc.poll() is None:
                node.proc.wait(timeout=10)
        if self._own_temp_dir:
            shutil.rmtree(self.temp_dir, ignore_errors=True)

    def __enter__(self) -> "LocalCluster":
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()


def session_pids(sid: int) -> list[int]:
    """The processes of session `sid`: a node's `ray start`, its raylet and the worker
    processes the raylet started (each worker has a process group of its own, but stays
    in the node's session)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.getsid(int(entry)) == sid:
                    pids.append(int(entry))
            except (ProcessLookupError, PermissionError):
                continue
    return pids


def _signal_session(sid: int, sig: int) -> None:
    for pid in session_pids(sid):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--gpus-per-worker", type=int, default=2, help="logical GPUs per worker node")
    ap.add_argument("--cpus-per-worker", type=int, default=2, help="logical CPUs per worker node")
    ap.add_argument("--head-cpus", type=int, default=2)
    ap.add_argument("--base-port", type=int, default=46400)
    ap.add_argument("--dashboard", action="store_true", help="start the dashboard (for `ray job submit`)")
    args = ap.parse_args()
    cluster = LocalCluster(base_port=args.base_port, dashboard=args.dashboard)
    try:
        cluster.start_head(cpus=args.head_cpus)
        for _ in range(args.workers):
            cluster.add_worker(cpus=args.cpus_per_worker, gpus=args.gpus_per_worker)
        print(f"cluster up: {len(cluster.nodes)} nodes, address {cluster.address}"
              + (f", dashboard {cluster.dashboard_url}" if args.dashboard else ""), flush=True)
        print(f"export RAY_AUTH_MODE=token RAY_AUTH_TOKEN={cluster.token} RAY_ADDRESS={cluster.address}", flush=True)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    except KeyboardInterrupt:
        pass
    finally:
        cluster.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
