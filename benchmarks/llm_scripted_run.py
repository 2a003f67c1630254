"""The LLM path end to end: the real main job with `llm=openai` against the project's
scripted OpenAI-compatible server on loopback, whose "model" answers every kernel request
with a real kernel for the task in the prompt, of varied quality.

    python benchmarks/llm_scripted_run.py [--path ../shared/kernelbench] [--problems 1/24 1/40 ...]
        [--wall-s 300] [--device cuda|cpu] [--keep DIR] [--out llm.json]

The kernels come from the template engine (`foundry.templates.engine.emit`, Triton on a
GPU, `c` on a CPU) for the task whose source the prompt quotes, and rotate through:
correct (a random TUNABLE setting), slower (the smallest setting of each knob), broken
(a syntax error), wrong (its output scaled by 1.01), an edit of the parent (SEARCH/REPLACE
of the parent's PARAMS line, where the prompt has one), and the server's own failures (a
500, a 429 with retry-after, a reply that hangs past the client's timeout). A repair
prompt (its parent failed) always gets a correct kernel. Prompt-edit requests get the
stand-in answer. Everything else runs for real: prompts with device specs and the
parent's metrics, parsing, compiling, judging, archives, migration, prompt evolution.

Reported: evaluations and judged per minute, how many candidates were correct, how many
repairs (a child of an incorrect parent) were correct, the server's replies by kind, the
LLM calls by outcome, whether every evaluation the log holds was recorded once, how many
elites the islands hold that another island sent them (migration), and an
excerpt of one optimize prompt (device specs, the parent's metrics) and one repair prompt
(the parent's error), saved in full under --keep.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))

from kernelbench_throughput import link_problems  # noqa: E402
from support.openai_server import ScriptedOpenAIServer, ScriptedResponse, stand_in_responder  # noqa: E402

KINDS = ("correct", "slower", "broken", "edit", "wrong", "server_error", "correct", "rate_limited", "hang")
CLIENT_TIMEOUT_S = 20.0
WRONG_TAIL = '''

_forward_as_written = ModelNew.forward


def _scaled_forward(self, *args):
    return _forward_as_written(self, *args) * 1.01


ModelNew.forward = _scaled_forward
'''


class ScriptedKernelWriter:
    """The server's answers (see the module doc); counts what it sent, by kind."""

    def __init__(self, tasks: list, *, backend: str, seed: int = 0):
        from foundry.templates.engine import coverage, emit
        from foundry.tuning.space import read_tunable
        self.backend, self.rng = backend, random.Random(seed)
        self.emit, self.read_tunable = emit, read_tunable
        self.tasks = [t for t in tasks if coverage(t) is None]
        self.skipped = sorted(t.task_id for t in tasks if coverage(t) is not None)
        self.kinds = itertools.cycle(KINDS)
        self.sent: collections.Counter = collections.Counter()
        self.lock = threading.Lock()

    def _task_in(self, prompt: str):
        named = re.search(r"## Reference module \(task `([^`]+)`", prompt)
        return next((t for t in self.tasks if named and t.task_id == named.group(1)), None)

    def _source(self, task, *, pick) -> str:
        base = self.emit(task, backend=self.backend)
        space = self.read_tunable(base) or {}
        params = {k: pick(list(v)) for k, v in space.items() if v}
        return self.emit(task, backend=self.backend, params=params) if params else base

    def __call__(self, request: dict) -> ScriptedResponse:
        prompt = "\n".join(str(m.get("content", "")) for m in request.get("messages", []))
        task = self._task_in(prompt)
        if task is None:  # a prompt-edit request, or a task without a template
            with self.lock:
                self.sent["not a kernel request"] += 1
            return stand_in_responder(request)
        repair = "The parent reached stage" in prompt
        with self.lock:
            kind = "correct" if repair else next(self.kinds)
            self.sent["repair" if repair else kind] += 1
            rng = random.Random(self.rng.random())
        if kind == "server_error":
            return ScriptedResponse.server_error(500)
        if kind == "rate_limited":
            return ScriptedResponse.rate_limited(0.2)
        if kind == "hang":
            return ScriptedResponse.delayed(CLIENT_TIMEOUT_S + 5.0)
        if kind == "slower":
            return ScriptedResponse.full_file(self._source(task, pick=lambda values: min(values)))
        source = self._source(task, pick=rng.choice)
        if kind == "broken":
            return ScriptedResponse.full_file(source.replace("def forward(self", "def forward(self,, ", 1))
        if kind == "wrong":
            return ScriptedResponse.full_file(source + WRONG_TAIL)
        if kind == "edit":
            line = re.search(r"^PARAMS = \{.*\}$", prompt, re.M)
            other = re.search(r"^PARAMS = \{.*\}$", source, re.M)
            if line and other and line.group(0) != other.group(0):
                return ScriptedResponse.diff([(line.group(0), other.group(0))], prose="Retuned the launch.")
        return ScriptedResponse.full_file(source)


def migrants_held(run_dir: Path) -> int:
    """Elites the islands' last checkpoints hold that another island sent them."""
    from foundry.store.rundir import RunDir
    from islands.checkpoint import read_checkpoint
    return sum(1 for path in sorted(RunDir(run_dir).checkpoints.glob("island-*/**/*.ckpt"))
               for e in read_checkpoint(path=path)["archive"]["elites"] if e.get("is_migrant"))


def summarize(run_dir: Path, *, wall_s: float) -> dict:
    from foundry.store import read_evaluations
    from foundry.store.rundir import RunDir
    from foundry.store.unfinished import read_unfinished
    records = read_evaluations(run_dir)
    correct_by_id = {r.candidate.candidate_id: r.result.correct for r in records}
    children_of_failures = [r for r in records if r.candidate.parent_ids
                            and correct_by_id.get(r.candidate.parent_ids[0]) is False]
    calls = collections.Counter(c.get("outcome", "?") for c in RunDir(run_dir).read_llm_calls())
    ids = [r.eval_id for r in records]
    return {"evaluations": len(records), "correct": sum(r.result.correct for r in records),
            "per_min_whole_run": round(60 * len(records) / wall_s, 2) if wall_s else None,
            "repairs": len(children_of_failures),
            "repairs_correct": sum(r.result.correct for r in children_of_failures),
            "llm_strategies": collections.Counter(r.candidate.strategy_id or r.candidate.origin for r in records),
            "llm_call_outcomes": dict(calls), "each_evaluation_once": len(ids) == len(set(ids)),
            "unfinished": len(read_unfinished(run_dir)), "migrants_held": migrants_held(run_dir)}


def excerpts(server: ScriptedOpenAIServer, keep: Path) -> dict:
    """One optimize prompt (one whose parent carries a hardware profile where there is
    one) and one repair prompt, saved whole."""
    optimize, profiled, repair = None, None, None
    for req in server.chat_requests():
        text = req.prompt_text
        if "The parent reached stage" in text:
            repair = repair or text
        elif "## Parent kernel" in text:
            optimize = optimize or text
            if "hardware_diagnosis" in text:
                profiled = profiled or text
    out = {name: text for name, text in (("optimize", profiled or optimize), ("repair", repair)) if text}
    for name, text in out.items():
        (keep / f"prompt_{name}.txt").write_text(text)
    return {name: text[:3000] for name, text in out.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--path", default=str(ROOT.parent / "shared" / "kernelbench"))
    ap.add_argument("--problems", nargs="+", default=["1/24", "1/26", "1/40", "1/47", "1/89", "2/86"])
    ap.add_argument("--wall-s", type=float, default=300.0)
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--keep", default="")
    ap.add_argument("--override", nargs="*", default=[])
    ap.add_argument("--out", default="")
    a = ap.parse_args()

    from foundry.tasks.loader import load_task
    keep = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="llm-scripted-"))
    keep.mkdir(parents=True, exist_ok=True)
    ids = link_problems(Path(a.path), a.problems, keep / "tasks")
    profile = "full" if a.device == "cuda" else "small"
    tasks = [load_task(keep / "tasks" / f"{t}.py", profile=profile) for t in ids]
    writer = ScriptedKernelWriter(tasks, backend="triton" if a.device == "cuda" else "c")
    print(f"{len(ids)} problems; no template for: {', '.join(writer.skipped) or 'none'}", flush=True)
    run_dir = keep / "run"
    levels = ",".join(sorted({t.split("/")[0][len("level"):] for t in ids}, key=int))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "OPENAI_API_KEY": "scripted-server-needs-no-key"}
    with ScriptedOpenAIServer(default=writer) as server:
        cmd = [sys.executable, "-m", "foundry", "tasks=kernelbench", f"tasks.path={keep / 'tasks'}",
               f"tasks.level=[{levels}]", "tasks.ids=null", f"tasks.profile={profile}", "llm=openai",
               f"llm.base_url={server.base_url}", "llm.model=gpt-4.1-mini", f"llm.timeout_s={CLIENT_TIMEOUT_S}",
               "llm.max_retries=2", "run.compiler_seeds=false", "budget.evaluations=null",
               f"budget.wall_time_s={a.wall_s}", "run.progress=log", "run.progress_every_s=60",
               f"hydra.run.dir={run_dir}", *a.override]
        t0 = time.monotonic()
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.monotonic() - t0
        (keep / "run.log").write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
        shown = excerpts(server, keep)
        requests = len(server.chat_requests())
    result = {"problems": ids, "device": a.device, "exit_code": proc.returncode, "wall_s": round(wall, 1),
              "server_requests": requests, "server_replies": dict(writer.sent),
              **summarize(run_dir, wall_s=wall), "prompt_excerpts": shown}
    if proc.returncode != 0:
        print(proc.stdout[-2000:] + proc.stderr[-3000:], flush=True)
    print(json.dumps({k: v for k, v in result.items() if k != "prompt_excerpts"}, indent=1, default=str), flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps(result, indent=1, default=str))
    return 0 if proc.returncode == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
