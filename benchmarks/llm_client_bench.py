"""Benchmark of the LLM client against the scripted OpenAI-compatible server.

Two measurements, with the server in its own process (so its threads do not share the
client's interpreter lock):

1. Concurrency: N requests (default 64) started at once from one event loop against a
   server that holds each request for `--delay` seconds. Reports the peak number of
   requests in flight (client side and server side), the wall time against the serial
   time, and the event loop's worst lag measured by a 1 ms ticker while they run.
2. Client overhead: sequential requests against a zero-delay server. Overhead per request
   = client-observed latency minus the server's handler time for that request, for our
   `LLMClient` (budget, semaphore, accounting, retries) and for a bare `AsyncOpenAI`;
   the target is checked on the median (the mean moves with other load on the machine),
   and the client process's CPU time per request is shown beside it.

    python benchmarks/llm_client_bench.py [--requests 64] [--delay 0.25] [--sequential 300]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
TARGET_IN_FLIGHT = 32
TARGET_OVERHEAD_MS = 5.0


def serve() -> None:
    """Child process: a scripted server whose per-request delay is set over stdin."""
    sys.path.insert(0, str(TESTS))
    from support.openai_server import ScriptedOpenAIServer, ScriptedResponse

    state = {"delay": 0.0}
    reply = "Done.\n```python\nclass ModelNew:\n    pass\n```\n"
    server = ScriptedOpenAIServer(default=lambda body: ScriptedResponse.text(reply, delay_s=state["delay"]))
    server.start()
    print(server.port, flush=True)
    for line in sys.stdin:
        cmd, _, arg = line.strip().partition(" ")
        if cmd == "delay":
            state["delay"] = float(arg)
            print("ok", flush=True)
        elif cmd == "stats":
            reqs = server.chat_requests()
            print(json.dumps({"n": len(reqs), "served_s": [r.served_s for r in reqs],
                              "peak_in_flight": server.peak_in_flight}), flush=True)
        elif cmd == "reset":
            with server._lock:
                server.requests.clear()
                server.server_time_s = 0.0
                server.peak_in_flight = 0
            print("ok", flush=True)
        elif cmd == "quit":
            break
    server.stop()


class ServerProcess:
    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, __file__, "--serve"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, bufsize=1)
        self.port = int(self.proc.stdout.readline())
        self.base_url = f"http://127.0.0.1:{self.port}/v1"

    def ask(self, cmd: str) -> str:
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def close(self) -> None:
        try:
            self.ask("quit")
        except (BrokenPipeError, ValueError):
            pass
        self.proc.wait(timeout=10)


def _config(base_url: str, concurrency: int):
    from foundry.llm import LLMConfig
    return LLMConfig.from_config({"provider": "compatible", "base_url": base_url,
                                  "model": "bench-model", "timeout_s": 60, "max_retries": 0,
                                  "budget": {"max_concurrency": concurrency}})


MESSAGES = [{"role": "system", "content": "You write kernels. " * 50},
            {"role": "user", "content": "Make it faster. " * 200}]


async def concurrency_phase(server: ServerProcess, n: int, delay: float) -> dict:
    from foundry.llm import LLMClient
    server.ask(f"delay {delay}")
    server.ask("reset")
    client = LLMClient(_config(server.base_url, n))
    in_flight = {"now": 0, "peak": 0}
    lags: list[float] = []
    done = asyncio.Event()

    async def ticker():
        loop = asyncio.get_running_loop()
        while not done.is_set():
            t = loop.time()
            await asyncio.sleep(0.001)
            lags.append(loop.time() - t - 0.001)

    async def one():
        in_flight["now"] += 1
        in_flight["peak"] = max(in_flight["peak"], in_flight["now"])
        try:
            return await client.complete(MESSAGES)
        finally:
            in_flight["now"] -= 1

    await client.complete(MESSAGES)  # connection set-up and imports outside the timing
    server.ask("reset")
    tick = asyncio.create_task(ticker())  # first, the loop's lag with nothing else to do
    await asyncio.sleep(max(0.5, delay * 2))
    idle, lags[:] = list(lags), []
    t0, c0 = time.perf_counter(), time.process_time()
    replies = await asyncio.gather(*(one() for _ in range(n)))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    done.set()
    await tick
    lags.sort()
    idle.sort()
    await client.aclose()
    stats = json.loads(server.ask("stats"))
    return {"requests": n, "server_delay_s": delay, "ok": sum(r.ok for r in replies),
            "wall_s": wall, "serial_s": n * delay, "client_cpu_ms_per_request": 1000 * cpu / n, "client_peak_in_flight": in_flight["peak"],
            "server_peak_in_flight": stats["peak_in_flight"],
            "loop_ticks": len(lags), "loop_lag_p50_ms": 1000 * lags[len(lags) // 2],
            "loop_lag_p99_ms": 1000 * lags[int(0.99 * (len(lags) - 1))],
            "loop_lag_max_ms": 1000 * lags[-1],
            "idle_loop_lag_p99_ms": 1000 * idle[int(0.99 * (len(idle) - 1))],
            "idle_loop_lag_max_ms": 1000 * idle[-1]}


async def overhead_phase(server: ServerProcess, n: int, *, bare: bool) -> dict:
    import openai
    from foundry.llm import LLMClient
    server.ask("delay 0")
    if bare:
        raw = openai.AsyncOpenAI(base_url=server.base_url, api_key="no-key", max_retries=0)

        async def call():
            await raw.chat.completions.create(model="bench-model", messages=MESSAGES, max_tokens=256)
    else:
        client = LLMClient(_config(server.base_url, 32))

        async def call():
            r = await client.complete(MESSAGES)
            assert r.ok, r

    for _ in range(20):  # warm-up
        await call()
    server.ask("reset")
    lat = []
    c0 = time.process_time()
    for _ in range(n):
        t0 = time.perf_counter()
        await call()
        lat.append(time.perf_counter() - t0)
    cpu = time.process_time() - c0
    await (raw.close() if bare else client.aclose())
    served = json.loads(server.ask("stats"))["served_s"]
    over = [1000 * (a - b) for a, b in zip(lat, served)]
    return {"client": "AsyncOpenAI (bare)" if bare else "LLMClient", "requests": n,
            "latency_p50_ms": 1000 * statistics.median(lat),
            "server_handler_p50_ms": 1000 * statistics.median(served),
            "client_cpu_ms_per_request": 1000 * cpu / n,
            "overhead_mean_ms": statistics.fmean(over), "overhead_p50_ms": statistics.median(over),
            "overhead_p95_ms": sorted(over)[int(0.95 * (len(over) - 1))]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--delay", type=float, default=0.25)
    ap.add_argument("--sequential", type=int, default=300)
    ap.add_argument("--json", default=str(ROOT / "outputs" / "benchmarks" / "llm_client_bench.json"))
    args = ap.parse_args()
    import openai
    server = ServerProcess()
    try:
        conc = asyncio.run(concurrency_phase(server, args.requests, args.delay))
        ours = asyncio.run(overhead_phase(server, args.sequential, bare=False))
        bare = asyncio.run(overhead_phase(server, args.sequential, bare=True))
    finally:
        server.close()
    result = {
        "machine": f"{platform.machine()} {os.cpu_count()} CPUs", "python": platform.python_version(),
        "openai": openai.__version__, "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "concurrency": conc, "overhead": [ours, bare],
        "pass": {"in_flight>=32": conc["server_peak_in_flight"] >= TARGET_IN_FLIGHT,
                 "overhead<5ms": ours["overhead_p50_ms"] < TARGET_OVERHEAD_MS},
    }
    print(f"concurrency: {conc['requests']} requests, server holds each {conc['server_delay_s']} s")
    print(f"  {'ok':>4} {'wall s':>7} {'serial s':>9} {'cpu ms/req':>10} {'in flight client/server':>24} "
          f"{'loop lag p50/p99/max ms':>24} {'idle p99/max ms':>16}")
    print(f"  {conc['ok']:4d} {conc['wall_s']:7.3f} {conc['serial_s']:9.2f} {conc['client_cpu_ms_per_request']:10.2f} "
          f"{conc['client_peak_in_flight']:>14d} / {conc['server_peak_in_flight']:<7d} "
          f"{conc['loop_lag_p50_ms']:8.2f} /{conc['loop_lag_p99_ms']:6.2f} /{conc['loop_lag_max_ms']:7.2f} "
          f"{conc['idle_loop_lag_p99_ms']:8.2f} /{conc['idle_loop_lag_max_ms']:6.2f}")
    print(f"overhead: {args.sequential} sequential requests, zero-delay server")
    print(f"  {'client':<20} {'latency p50':>12} {'server p50':>11} {'cpu/req':>8} "
          f"{'overhead mean':>14} {'p50':>7} {'p95':>7}  (ms)")
    for row in (ours, bare):
        print(f"  {row['client']:<20} {row['latency_p50_ms']:12.3f} {row['server_handler_p50_ms']:11.3f} "
              f"{row['client_cpu_ms_per_request']:8.3f} "
              f"{row['overhead_mean_ms']:14.3f} {row['overhead_p50_ms']:7.3f} {row['overhead_p95_ms']:7.3f}")
    print("targets: " + ", ".join(f"{k}: {'PASS' if v else 'FAIL'}" for k, v in result["pass"].items()))
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"wrote {out}")
    return 0 if all(result["pass"].values()) else 1


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve()
    else:
        sys.exit(main())
