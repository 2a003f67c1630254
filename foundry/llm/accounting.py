"""One record per LLM request (every attempt, retries included), and secret scrubbing.

The runtime passes a sink (`on_call`) to the client; the client calls it with an
`LLMCallRecord` for each HTTP request it made, and the sink writes it to the run log.
Records carry no prompt text and no key: only model, endpoint host, tokens, latency,
cost, outcome and a scrubbed error line.
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass
from typing import Callable, Iterable

OUTCOMES = (
    "ok",  # a reply with content
    "empty",  # HTTP 200 but no content
    "bad_response",  # HTTP 200 that is not a valid chat completion (malformed JSON, ...)
    "rate_limited",  # HTTP 429
    "server_error",  # HTTP 5xx
    "client_error",  # other HTTP 4xx (bad model name, bad key, ...): not retried
    "timeout",  # no reply within llm.timeout_s
    "connection_error",  # could not connect / connection dropped
    "budget",  # a budget ended the run before this attempt could start
)

_KEY_PATTERNS = (
    re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}"),
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._\-]{8,}"),
    re.compile(r"\bhf_[A-Za-z0-9]{8,}"),
)


@dataclass(frozen=True)
class LLMCallRecord:
    """Accounting for one HTTP request to a chat-completions endpoint."""

    call_id: str  # one logical call; its retries share it
    attempt: int  # 1 for the first request, 2 for the first retry, ...
    final: bool  # the last attempt of this call
    purpose: str  # "propose" | "prompt_edit" | ...
    model: str
    endpoint: str  # scheme://host:port only
    outcome: str  # one of OUTCOMES
    status: int | None  # HTTP status, None when there was no response
    prompt_tokens: int
    completion_tokens: int
    usage_estimated: bool  # the server sent no usage; tokens are estimated from characters
    latency_s: float
    cost_usd: float
    retry_after_s: float | None = None
    error: str = ""  # scrubbed, one line, truncated
    task_id: str = ""
    island_id: int = -1
    prompt_id: str = ""

    def to_row(self) -> dict:
        return asdict(self)


CallSink = Callable[[LLMCallRecord], None]


def secret_values(env_names: Iterable[str | None]) -> tuple[str, ...]:
    """The values of the named environment variables that look like secrets."""
    out = []
    for name in env_names:
        if name:
            v = os.environ.get(name, "")
            if len(v) >= 6:
                out.append(v)
    return tuple(out)


def scrub(text: str, secrets: Iterable[str] = (), *, limit: int = 500) -> str:
    """Remove known secret values and key-shaped strings; one line, at most `limit` chars."""
    text = str(text)
    for s in secrets:
        if s:
            text = text.replace(s, "[redacted]")
    for pat in _KEY_PATTERNS:
        text = pat.sub("[redacted]", text)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def endpoint_of(base_url: str | None) -> str:
    """`https://user:pw@host:8000/v1?x=y` -> `https://host:8000` (no credentials, no path)."""
    if not base_url:
        return "https://api.openai.com"
    m = re.match(r"^([a-z]+://)?(?:[^@/]*@)?([^/?#]+)", base_url)
    return ((m.group(1) or "") + m.group(2)) if m else "?"


def estimate_tokens(text: str) -> int:
    """Rough token count (about 4 characters per token) when a server reports none."""
    return max(1, (len(text) + 3) // 4) if text else 0


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """Replace known secret values and key-shaped strings, keeping the layout."""
    for s in secrets:
        if s:
            text = text.replace(s, "[redacted]")
    for pat in _KEY_PATTERNS:
        text = pat.sub("[redacted]", text)
    return text
