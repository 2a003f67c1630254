"""Keeping secrets out of workers and out of every text that comes back from them.

Workers get an environment without any variable whose name contains KEY, TOKEN, SECRET
or PASSWORD (case-insensitive; PASSWD and CREDENTIAL too), nor any name listed in the
config. A candidate may still find secret values another way (another process's
/proc/<pid>/environ, a file), so every text that leaves a worker (errors, logs) is also
scrubbed of those values, in plain and in common encodings.
"""

from __future__ import annotations

import base64
import os
import urllib.parse
from typing import Iterable, Mapping

SECRET_NAME_PARTS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")
MIN_SECRET_LEN = 4  # shorter values would scrub ordinary text
REDACTED = "[redacted]"


def is_secret_name(name: str, extra_names: Iterable[str] = ()) -> bool:
    upper = name.upper()
    return any(part in upper for part in SECRET_NAME_PARTS) or name in set(extra_names)


def clean_env(env: Mapping[str, str], extra_names: Iterable[str] = ()) -> dict[str, str]:
    """A copy of `env` without secret-named variables."""
    extra = set(extra_names)
    return {k: v for k, v in env.items() if not is_secret_name(k, extra)}


def secret_values(env: Mapping[str, str] | None = None, extra_names: Iterable[str] = ()) -> tuple[str, ...]:
    """The values of secret-named variables in `env` (default: this process's)."""
    env = os.environ if env is None else env
    extra = set(extra_names)
    vals = {v for k, v in env.items() if is_secret_name(k, extra) and len(v) >= MIN_SECRET_LEN}
    return tuple(sorted(vals, key=len, reverse=True))


def _variants(value: str) -> list[str]:
    raw = value.encode()
    out = [value, value[::-1], urllib.parse.quote(value, safe=""), raw.hex(), raw.hex().upper()]
    for enc in (base64.b64encode, base64.urlsafe_b64encode, base64.b32encode):
        s = enc(raw).decode()
        out += [s, s.rstrip("=")]
    return [v for v in dict.fromkeys(out) if len(v) >= MIN_SECRET_LEN]


class Scrubber:
    """Replaces secret values (and their encodings) in text with `[redacted]`."""

    def __init__(self, values: Iterable[str]):
        needles: list[str] = []
        for v in values:
            needles += _variants(v)
        self._needles = sorted(set(needles), key=len, reverse=True)

    @classmethod
    def from_environ(cls, extra_names: Iterable[str] = ()) -> "Scrubber":
        return cls(secret_values(os.environ, extra_names))

    def __call__(self, text: str) -> str:
        if not text:
            return text
        for n in self._needles:
            if n in text:
                text = text.replace(n, REDACTED)
        return text


def truncate(text: str, limit: int) -> str:
    """Keep the head and the tail (where tracebacks put the cause)."""
    if len(text) <= limit:
        return text
    head = limit // 4
    tail = limit - head - 40
    return text[:head] + f"\n... [{len(text) - head - tail} chars cut] ...\n" + text[-tail:]
