"""An async client for any OpenAI-compatible chat-completions endpoint.

Built on the `openai` package's `AsyncOpenAI`, with the package's own retries turned
off so that every HTTP request is ours to count: each attempt passes the run's
`Budget`, is bounded by `max_concurrency`, and yields one `LLMCallRecord` to the sink.
Retried: 429 (honouring `retry-after` / `retry-after-ms`), 5xx, timeouts and dropped
connections, with exponential backoff and jitter. Not retried: other 4xx and replies
that are not a valid completion. `complete()` never raises for a failed request: it
returns an `LLMReply` whose `outcome` says what happened. It raises only
`BudgetExhausted` (no new call may start) and `asyncio.CancelledError`.

The API key is read from the environment variable named by `llm.api_key_env`; servers
that need no key get a placeholder, because the `openai` package insists on one.
"""

from __future__ import annotations

import asyncio
import email.utils
import itertools
import logging
import os
import random
import time
from dataclasses import dataclass
from typing import Any, Sequence

import openai

from foundry.config_keys import ConfigError
from foundry.llm.accounting import (CallSink, LLMCallRecord, endpoint_of, estimate_tokens,
                                    scrub, secret_values)
from foundry.llm.budget import Budget, BudgetExhausted
from foundry.llm.config import KEYLESS_PLACEHOLDER, EnsembleMember, LLMConfig

log = logging.getLogger(__name__)
RETRYABLE = ("rate_limited", "server_error", "timeout", "connection_error")
_ids = itertools.count(1)


@dataclass(frozen=True)
class LLMReply:
    """The result of one logical call (after retries)."""

    text: str
    model: str
    outcome: str  # outcome of the last attempt (see accounting.OUTCOMES)
    attempts: int
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0  # all attempts and backoff sleeps
    finish_reason: str | None = None
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"


@dataclass
class _Attempt:
    outcome: str
    text: str = ""
    status: int | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated: bool = False
    finish_reason: str | None = None
    retry_after_s: float | None = None
    error: str = ""
    latency_s: float = 0.0


def _retry_after(headers: Any) -> float | None:
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000.0)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError, OverflowError):
        return None


class LLMClient:
    """One client for the whole run: an ensemble of models, one budget, one sink."""

    def __init__(self, config: LLMConfig, *, on_call: CallSink | None = None,
                 budget: Budget | None = None, sleep=asyncio.sleep):
        if not config.enabled:
            raise ConfigError("llm.provider is 'none': there is no LLM client to make")
        self.config = config
        self.budget = budget or Budget(config.budget)
        self._on_call = on_call
        self._sleep = sleep
        self._members = config.members()
        self._clients: dict[tuple, openai.AsyncOpenAI] = {}
        self._semaphore: asyncio.Semaphore | None = None
        self._secrets = secret_values(
            [config.api_key_env, *(m.api_key_env for m in self._members)])
        for m in self._members:  # fail at start, not at the first call
            self._api_key(m)

    @property
    def secrets(self) -> tuple[str, ...]:
        """The key values this client knows, for redaction (never logged)."""
        return self._secrets

    # -- endpoints ---------------------------------------------------------------------

    def _base_url(self, member: EnsembleMember) -> str | None:
        return member.base_url or self.config.base_url

    def _api_key(self, member: EnsembleMember) -> str:
        env = member.api_key_env or self.config.api_key_env
        key = os.environ.get(env, "") if env else ""
        if key:
            return key
        base = self._base_url(member)
        if self.config.provider == "openai" and (not base or "api.openai.com" in base):
            raise ConfigError(
                f"llm.provider is 'openai' but the environment variable "
                f"{env or '(llm.api_key_env unset)'} holds no API key")
        return KEYLESS_PLACEHOLDER

    def _client_for(self, member: EnsembleMember) -> openai.AsyncOpenAI:
        key = (self._base_url(member), member.api_key_env or self.config.api_key_env)
        client = self._clients.get(key)
        if client is None:
            client = openai.AsyncOpenAI(api_key=self._api_key(member), base_url=key[0],
                                        max_retries=0, timeout=self.config.timeout_s)
            self._clients[key] = client
        return client

    def pick_member(self, rng: random.Random) -> EnsembleMember:
        """A model of the ensemble, drawn by weight."""
        if len(self._members) == 1:
            return self._members[0]
        return rng.choices(self._members, weights=[m.weight for m in self._members])[0]

    # -- calls -------------------------------------------------------------------------

    async def complete(self, messages: Sequence[dict], *, purpose: str = "propose",
                       rng: random.Random | None = None, seed: int | None = None,
                       task_id: str = "", island_id: int = -1, prompt_id: str = "",
                       max_tokens: int | None = None) -> LLMReply:
        """Send one chat completion (retrying as configured) and return the reply."""
        rng = rng or random.Random()
        member = self.pick_member(rng)
        call_id = f"c{os.getpid()}-{next(_ids)}"
        started = time.monotonic()
        attempts_allowed = 1 + self.config.max_retries
        usage = [0, 0, 0.0]
        last = _Attempt(outcome="connection_error")
        for attempt in range(1, attempts_allowed + 1):
            try:
                self.budget.admit()
            except BudgetExhausted as e:  # the run log says which budget ended it
                self._emit(LLMCallRecord(
                    call_id=call_id, attempt=attempt, final=True, purpose=purpose,
                    model=member.model, endpoint=endpoint_of(self._base_url(member)),
                    outcome="budget", status=None, prompt_tokens=0, completion_tokens=0,
                    usage_estimated=False, latency_s=0.0, cost_usd=0.0, error=str(e),
                    task_id=task_id, island_id=island_id, prompt_id=prompt_id))
                raise
            last = await self._attempt(member, messages, seed=seed, max_tokens=max_tokens)
            cost = self.config.price_for(member.model).cost(last.prompt_tokens, last.completion_tokens)
            self.budget.charge(prompt_tokens=last.prompt_tokens,
                               completion_tokens=last.completion_tokens, cost_usd=cost)
            usage[0] += last.prompt_tokens
            usage[1] += last.completion_tokens
            usage[2] += cost
            retry = last.outcome in RETRYABLE and attempt < attempts_allowed
            if retry:
                try:
                    self.budget.check()
                except BudgetExhausted as e:
                    retry, last.error = False, f"{last.error}; not retried: {e}"
            self._emit(LLMCallRecord(
                call_id=call_id, attempt=attempt, final=not retry, purpose=purpose,
                model=member.model, endpoint=endpoint_of(self._base_url(member)),
                outcome=last.outcome, status=last.status, prompt_tokens=last.prompt_tokens,
                completion_tokens=last.completion_tokens, usage_estimated=last.estimated,
                latency_s=last.latency_s, cost_usd=cost, retry_after_s=last.retry_after_s,
                error=scrub(last.error, self._secrets), task_id=task_id,
                island_id=island_id, prompt_id=prompt_id))
            if not retry:
                break
            await self._sleep(self._backoff(attempt, last.retry_after_s, rng))
        return LLMReply(text=last.text, model=member.model, outcome=last.outcome,
                        attempts=attempt, prompt_tokens=usage[0], completion_tokens=usage[1],
                        cost_usd=usage[2], latency_s=time.monotonic() - started,
                        finish_reason=last.finish_reason, error=scrub(last.error, self._secrets))

    def _backoff(self, attempt: int, retry_after_s: float | None, rng: random.Random) -> float:
        if retry_after_s is not None:
            delay = min(retry_after_s, self.config.max_retry_after_s)
        else:
            base = self.config.backoff_base_s * (2 ** (attempt - 1))
            delay = min(self.config.backoff_max_s, base) * (0.5 + 0.5 * rng.random())
        remaining = self.budget.remaining_wall_s()
        return delay if remaining is None else min(delay, remaining)

    async def _attempt(self, member: EnsembleMember, messages: Sequence[dict], *,
                       seed: int | None, max_tokens: int | None) -> _Attempt:
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.config.budget.max_concurrency)
        async with self._semaphore:
            t0 = time.monotonic()
            result = await self._request(member, messages, seed=seed, max_tokens=max_tokens)
            result.latency_s = time.monotonic() - t0
            return result

    def _request_kwargs(self, member: EnsembleMember, messages, seed, max_tokens) -> dict:
        cfg = self.config
        kwargs: dict[str, Any] = {"model": member.model, "messages": list(messages)}
        limit = max_tokens or cfg.max_tokens
        kwargs["max_completion_tokens" if cfg.provider == "openai" else "max_tokens"] = limit
        if cfg.temperature is not None:
            kwargs["temperature"] = cfg.temperature
        if cfg.send_seed and seed is not None:
            kwargs["seed"] = int(seed) % (2 ** 31)
        if cfg.extra_body:
            kwargs["extra_body"] = dict(cfg.extra_body)
        timeout = cfg.timeout_s
        remaining = self.budget.remaining_wall_s()
        if remaining is not None:
            timeout = max(0.001, min(timeout, remaining))
        kwargs["timeout"] = timeout
        return kwargs

    async def _request(self, member, messages, *, seed, max_tokens) -> _Attempt:
        client = self._client_for(member)
        kwargs = self._request_kwargs(member, messages, seed, max_tokens)
        prompt_chars = sum(len(str(m.get("content", ""))) for m in messages)
        try:
            completion = await client.chat.completions.create(**kwargs)
        except openai.APITimeoutError as e:
            return _Attempt("timeout", error=f"no reply within {kwargs['timeout']:.1f} s ({e})")
        except openai.APIConnectionError as e:
            return _Attempt("connection_error", error=f"{type(e).__name__}: {e}")
        except openai.APIStatusError as e:
            status = e.status_code
            outcome = ("rate_limited" if status == 429 else
                       "server_error" if status >= 500 else
                       "timeout" if status == 408 else "client_error")
            return _Attempt(outcome, status=status, retry_after_s=_retry_after(e.response.headers),
                            error=f"HTTP {status}: {e.message}")
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - malformed body, validation errors, ...
            return _Attempt("bad_response", status=200, error=f"{type(e).__name__}: {e}")
        return self._read_completion(completion, prompt_chars)

    @staticmethod
    def _read_completion(completion: Any, prompt_chars: int) -> _Attempt:
        choices = getattr(completion, "choices", None)
        if not choices:
            detail = completion if isinstance(completion, str) else type(completion).__name__
            return _Attempt("bad_response", status=200,
                            error=f"not a chat completion (no choices): {str(detail)[:200]}")
        choice = choices[0]
        message = getattr(choice, "message", None)
        text = (getattr(message, "content", None) or "") if message is not None else ""
        usage = getattr(completion, "usage", None)
        pt = getattr(usage, "prompt_tokens", None) if usage is not None else None
        ct = getattr(usage, "completion_tokens", None) if usage is not None else None
        estimated = pt is None or ct is None
        if estimated:
            pt, ct = estimate_tokens("x" * prompt_chars), estimate_tokens(text)
        outcome = "ok" if text.strip() else "empty"
        return _Attempt(outcome, text=text, status=200, prompt_tokens=int(pt),
                        completion_tokens=int(ct), estimated=estimated,
                        finish_reason=getattr(choice, "finish_reason", None),
                        error="" if outcome == "ok" else "the reply has no content")

    def _emit(self, record: LLMCallRecord) -> None:
        if self._on_call is None:
            return
        try:
            self._on_call(record)
        except Exception:  # noqa: BLE001 - a broken log sink must not stop the search
            log.exception("the LLM call sink failed on call %s", record.call_id)

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.close()
        self._clients.clear()
