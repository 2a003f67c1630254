"""Process states the sandbox tests read from /proc."""

from __future__ import annotations


def process_state(pid: int) -> str:
    """The one-letter state of `pid` (R, S, T for stopped, Z for a zombie, ...)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[-1].split()[0]


def is_alive(pid: int) -> bool:
    """`pid` exists and is neither a zombie nor dead."""
    try:
        return process_state(pid) not in ("Z", "X")
    except OSError:
        return False
