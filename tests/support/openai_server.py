"""A scripted OpenAI-compatible HTTP server for tests and benchmarks (stdlib only).

It serves real HTTP on 127.0.0.1 (an ephemeral port) from a background thread:
``POST /v1/chat/completions`` and ``GET /v1/models``. Each chat request takes the next
`ScriptedResponse` from the script queue; when the queue is empty, the `default`
responder answers (by default `stand_in_responder`, which writes a valid `c`-backend
candidate for the task the prompt carries, and a rewritten section for prompt-edit
requests). Every request is recorded (`server.requests`).

    with ScriptedOpenAIServer([ScriptedResponse.rate_limited(0.1),
                               ScriptedResponse.full_file(src)]) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="no-key")
"""

from __future__ import annotations

import collections
import json
import re
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Iterable

__all__ = ["ScriptedOpenAIServer", "ScriptedResponse", "RecordedRequest",
           "stand_in_responder", "stand_in_candidate", "unary_candidate",
           "reference_source_from_prompt"]


@dataclass(frozen=True)
class ScriptedResponse:
    """One scripted answer. `body` (raw bytes) overrides the JSON built from `content`."""

    status: int = 200
    content: str | None = ""
    body: bytes | None = None
    headers: tuple = ()  # ((name, value), ...)
    delay_s: float = 0.0
    usage: dict | None = None  # None: estimated from characters; {} : no usage field
    finish_reason: str = "stop"

    @classmethod
    def text(cls, content: str, **kw) -> "ScriptedResponse":
        return cls(content=content, **kw)

    @classmethod
    def full_file(cls, source: str, *, prose: str = "Here is the kernel.", **kw) -> "ScriptedResponse":
        return cls(content=f"{prose}\n\n```python\n{source.rstrip()}\n```\n", **kw)

    @classmethod
    def diff(cls, edits: Iterable[tuple[str, str]], *, prose: str = "Edits:", **kw) -> "ScriptedResponse":
        blocks = [f"<<<<<<< SEARCH\n{s.rstrip(chr(10))}\n=======\n{r.rstrip(chr(10))}\n>>>>>>> REPLACE"
                  for s, r in edits]
        return cls(content=prose + "\n\n```\n" + "\n".join(blocks) + "\n```\n", **kw)

    @classmethod
    def malformed_json(cls) -> "ScriptedResponse":
        return cls(body=b'{"id": "x", "object": "chat.completion", "choices": [{"message": {"con')

    @classmethod
    def empty(cls) -> "ScriptedResponse":
        return cls(content="")

    @classmethod
    def rate_limited(cls, retry_after_s: float = 0.1) -> "ScriptedResponse":
        return cls(status=429, headers=(("retry-after", f"{retry_after_s:g}"),))

    @classmethod
    def server_error(cls, status: int = 500) -> "ScriptedResponse":
        return cls(status=status)

    @classmethod
    def delayed(cls, delay_s: float, then: "ScriptedResponse | None" = None) -> "ScriptedResponse":
        base = then or cls(content="(slow reply with no code)")
        return cls(status=base.status, content=base.content, body=base.body, headers=base.headers,
                   delay_s=delay_s, usage=base.usage, finish_reason=base.finish_reason)

    @classmethod
    def huge(cls, n_chars: int = 2_000_000, *, source: str | None = None) -> "ScriptedResponse":
        filler = ("This paragraph repeats to make the reply very large. " * 20 + "\n")
        text = (filler * (n_chars // len(filler) + 1))[:n_chars]
        if source is not None:
            text += f"\n```python\n{source.rstrip()}\n```\n"
        return cls(content=text)


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict  # names lower-cased
    body: dict | None
    received_at: float
    served_s: float = 0.0

    @property
    def messages(self) -> list:
        return (self.body or {}).get("messages", [])

    @property
    def prompt_text(self) -> str:
        return "\n".join(str(m.get("content", "")) for m in self.messages)


Responder = Callable[[dict], ScriptedResponse]


class ScriptedOpenAIServer:
    """Start with `start()` or as a context manager; `base_url` ends in `/v1`."""

    def __init__(self, script: Iterable[ScriptedResponse] = (), *,
                 default: Responder | None = None, models: Iterable[str] = ("scripted-model",),
                 model_name: str | None = None):
        self._script: collections.deque = collections.deque(script)
        self.default = default or stand_in_responder
        self.models = tuple(models)
        self.model_name = model_name
        self.requests: list[RecordedRequest] = []
        self.server_time_s = 0.0  # summed handler time of chat requests, delays included
        self.in_flight = 0  # chat requests being handled now
        self.peak_in_flight = 0  # the most handled at once
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> "ScriptedOpenAIServer":
        server = self

        class Handler(_Handler):
            owner = server

        httpd = _Server(("127.0.0.1", 0), Handler)
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="scripted-openai-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()  # wakes handlers sleeping in a scripted delay
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "ScriptedOpenAIServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # -- script ------------------------------------------------------------------------

    def push(self, *responses: ScriptedResponse) -> None:
        with self._lock:
            self._script.extend(responses)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._script)

    def chat_requests(self) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def _next(self, body: dict) -> ScriptedResponse:
        with self._lock:
            if self._script:
                return self._script.popleft()
        return self.default(body)

    def _enter(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def _record(self, req: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(req)
            if req.path.endswith("/chat/completions"):
                self.server_time_s += req.served_s


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # the listen backlog: many clients connect at once


class _Handler(BaseHTTPRequestHandler):
    owner: ScriptedOpenAIServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # small replies must not wait for delayed ACKs

    def log_message(self, *args) -> None:  # keep test output clean
        return

    def _send(self, status: int, body: bytes, headers: Iterable = ()) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for name, value in headers:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
            self.close_connection = True

    def do_GET(self) -> None:
        t0 = time.monotonic()
        if self.path.rstrip("/").endswith("/models"):
            data = {"object": "list", "data": [{"id": m, "object": "model", "owned_by": "scripted"}
                                               for m in self.owner.models]}
            status, payload = 200, json.dumps(data).encode()
        else:
            status, payload = 404, b'{"error": {"message": "not found"}}'
        self.owner._record(RecordedRequest("GET", self.path, {k.lower(): v for k, v in self.headers.items()}, None, t0,
                                           time.monotonic() - t0))
        self._send(status, payload)

    def do_POST(self) -> None:
        t0 = time.monotonic()
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = None
        if not self.path.rstrip("/").endswith("/chat/completions") or body is None:
            self.owner._record(RecordedRequest("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body, t0))
            self._send(404 if body is not None else 400, b'{"error": {"message": "bad request"}}')
            return
        self.owner._enter()
        try:
            resp = self.owner._next(body)
            if resp.delay_s > 0:
                self.owner._stop.wait(resp.delay_s)
            payload = _body_for(resp, body, self.owner.model_name)
        finally:
            self.owner._leave()
        # recorded before the reply goes out, so a client that got it sees the record
        self.owner._record(RecordedRequest("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body, t0,
                                           time.monotonic() - t0))
        self._send(resp.status, payload, resp.headers)


def _body_for(resp: ScriptedResponse, request: dict, model_name: str | None) -> bytes:
    if resp.body is not None:
        return resp.body
    if resp.status != 200:
        kind = "rate_limit_exceeded" if resp.status == 429 else "server_error"
        return json.dumps({"error": {"message": f"scripted {resp.status}", "type": kind,
                                     "code": kind}}).encode()
    prompt_chars = sum(len(str(m.get("content", ""))) for m in request.get("messages", []))
    content = resp.content
    data = {
        "id": f"chatcmpl-{time.monotonic_ns()}", "object": "chat.completion",
        "created": int(time.time()), "model": model_name or request.get("model", "scripted-model"),
        "choices": [{"index": 0, "finish_reason": resp.finish_reason,
                     "message": {"role": "assistant", "content": content}}],
    }
    if resp.usage is None:
        data["usage"] = {"prompt_tokens": prompt_chars // 4,
                         "completion_tokens": len(content or "") // 4,
                         "total_tokens": prompt_chars // 4 + len(content or "") // 4}
    elif resp.usage:
        data["usage"] = dict(resp.usage)
    return json.dumps(data).encode()


# -- the stand-in LLM ------------------------------------------------------------------

_FENCE = re.compile(r"```[a-zA-Z0-9_+-]*[^\n]*\n(.*?)```", re.S)
_EDIT_MARK = "Return the new section text"


def reference_source_from_prompt(prompt: str) -> str | None:
    """The task's reference module: the first fenced block after the heading
    '## Reference module' (the prompt templates label it so)."""
    idx = prompt.find("## Reference module")
    if idx < 0:
        return None
    m = _FENCE.search(prompt, idx)
    return m.group(1) if m else None


_COPY_KERNEL = r'''
#include <stdint.h>
#include <string.h>
void copy_bytes(const char* src, char* dst, int64_t n, int64_t chunk) {
    for (int64_t i = 0; i < n; i += chunk) {
        int64_t m = n - i < chunk ? n - i : chunk;
        memcpy(dst + i, src + i, (size_t)m);
    }
}
'''


def stand_in_candidate(reference_source: str, *, variant: int = 0) -> str:
    """A valid `c`-backend candidate for any task whose outputs are CPU tensors: it runs
    the reference computation and passes each output through a real C kernel (a chunked
    copy). Correct, launches a kernel of its backend, not faster: a stand-in."""
    return (f"# stand-in candidate, variant {variant}\n{reference_source.rstrip()}\n\n"
            "import torch\nfrom foundry.kernels import c\n\n"
            f"SRC = r'''{_COPY_KERNEL}'''\n"
            'TUNABLE = {"CHUNK": [65536, 4096]}\nPARAMS = {"CHUNK": 65536}\n_lib = c.build(SRC)\n\n\n'
            "class ModelNew(Model):\n"
            "    def __init__(self, *args, **kwargs):\n"
            "        super().__init__(*args, **kwargs)\n"
            '        self._chunk = int(PARAMS["CHUNK"])\n\n'
            "    def _copy(self, t):\n"
            "        t = t.contiguous()\n"
            "        y = torch.empty_like(t)\n"
            "        _lib.copy_bytes(t, y, t.numel() * t.element_size(), self._chunk)\n"
            "        return y\n\n"
            "    def forward(self, *args):\n"
            "        out = super().forward(*args)\n"
            "        if isinstance(out, torch.Tensor):\n"
            "            return self._copy(out)\n"
            "        return type(out)(self._copy(o) if isinstance(o, torch.Tensor) else o for o in out)\n")


# Unary elementwise forwards the stand-in writes real kernels for: `return <call>(x)`.
_UNARY_C = {
    "relu": "v > 0.f ? v : 0.f",
    "sigmoid": "1.f / (1.f + expf(-v))",
    "tanh": "tanhf(v)",
    "silu": "v / (1.f + expf(-v))",
    "gelu": "0.5f * v * (1.f + erff(v * 0.70710678118654752f))",
}
_UNARY_CALL = re.compile(r"def forward\(self, (\w+)[^)]*\)[^:]*:\s*\n\s*return\s+"
                         r"(?:torch\.nn\.functional|torch|F)\.(\w+)\(\1\)\s*\n")

_UNARY_TEMPLATE = '''# stand-in candidate, variant {variant}: elementwise {op} as a C kernel
import torch
import torch.nn as nn
from foundry.kernels import c

SRC = r"""
#include <stdint.h>
#include <math.h>
void unary(const float* x, float* y, int64_t n, int64_t chunk) {{
    for (int64_t s = 0; s < n; s += chunk) {{
        int64_t e = s + chunk < n ? s + chunk : n;
        for (int64_t i = s; i < e; i++) {{ float v = x[i]; y[i] = {expr}; }}
    }}
}}
"""
TUNABLE = {{"CHUNK": [4096, 16384, 1024]}}
PARAMS = {{"CHUNK": 4096}}
_lib = c.build(SRC)


class ModelNew(nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()
        self.chunk = int(PARAMS["CHUNK"])

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.unary(x, y, x.numel(), self.chunk)
        return y
'''


def unary_candidate(reference_source: str, *, variant: int = 0) -> str | None:
    """A real `c` kernel for a reference whose forward is one unary elementwise call
    (relu, sigmoid, tanh, silu, gelu) on float32; None for any other reference."""
    m = _UNARY_CALL.search(reference_source)
    if not m or m.group(2) not in _UNARY_C:
        return None
    return _UNARY_TEMPLATE.format(variant=variant, op=m.group(2), expr=_UNARY_C[m.group(2)])


_counter = iter(range(1, 1 << 62))


def stand_in_responder(request: dict) -> ScriptedResponse:
    """Answers like a cooperative model: a prompt-edit request gets a rewritten section;
    a kernel request gets `unary_candidate` (a real C kernel) when the reference is one
    unary elementwise op, else `stand_in_candidate` (correct, but the evaluator's static
    guards reject it for calling the reference: a realistic failure for repair paths)."""
    prompt = "\n".join(str(m.get("content", "")) for m in request.get("messages", []))
    n = next(_counter)
    if _EDIT_MARK in prompt:
        m = re.search(r"<section>\n?(.*?)</section>", prompt, re.S)
        old = (m.group(1).strip() if m else "Write correct kernels first.")
        return ScriptedResponse.text(
            f"```text\n{old}\n- Revision {n}: measure before and after every change.\n```")
    ref = reference_source_from_prompt(prompt)
    if ref is None:
        return ScriptedResponse.text("I cannot find the reference module in the prompt.")
    return ScriptedResponse.full_file(unary_candidate(ref, variant=n) or stand_in_candidate(ref, variant=n))
