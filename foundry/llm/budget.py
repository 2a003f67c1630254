"""Run-wide LLM budgets: calls, tokens, cost and wall time.

One `Budget` is shared by every LLM call of a run (the proposer's and the prompt
evolver's, when they share a client). A call is admitted by `admit()`, which counts it
and raises `BudgetExhausted` naming the budget that ran out; once a budget has ended
the run, `exhausted_by` keeps saying which one, and every later `admit()` refuses.

Calls already in flight when a token or cost budget is crossed finish and are counted,
so those two budgets can be overshot by at most the in-flight calls' usage; the call
budget is exact (calls are counted when admitted).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from foundry.llm.config import BudgetConfig


class BudgetExhausted(RuntimeError):
    """No new LLM call may start: `budget` names the limit that was reached."""

    def __init__(self, budget: str, detail: str):
        super().__init__(f"LLM budget {budget} reached: {detail}")
        self.budget = budget
        self.detail = detail


@dataclass(frozen=True)
class BudgetSnapshot:
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    elapsed_s: float
    exhausted_by: str | None

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class Budget:
    """Counters and limits for one run. Thread-safe, cheap, no I/O."""

    def __init__(self, config: BudgetConfig | None = None, *, clock=time.monotonic):
        self.config = config or BudgetConfig()
        self._clock = clock
        self._start = clock()
        self._lock = threading.Lock()
        self.calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cost_usd = 0.0
        self._exhausted: tuple[str, str] | None = None

    @property
    def exhausted_by(self) -> str | None:
        """The budget that ended the run (`max_calls`, `max_tokens`, `max_cost_usd`,
        `max_wall_s`), or None while calls may still start."""
        with self._lock:
            return self._exhausted[0] if self._exhausted else None

    def elapsed_s(self) -> float:
        return self._clock() - self._start

    def remaining_wall_s(self) -> float | None:
        if self.config.max_wall_s is None:
            return None
        return max(0.0, self.config.max_wall_s - self.elapsed_s())

    def _reason(self) -> tuple[str, str] | None:
        c = self.config
        if c.max_calls is not None and self.calls >= c.max_calls:
            return "max_calls", f"{self.calls} of {c.max_calls} calls made"
        tokens = self.prompt_tokens + self.completion_tokens
        if c.max_tokens is not None and tokens >= c.max_tokens:
            return "max_tokens", f"{tokens} of {c.max_tokens} tokens used"
        if c.max_cost_usd is not None and self.cost_usd >= c.max_cost_usd:
            return "max_cost_usd", f"${self.cost_usd:.4f} of ${c.max_cost_usd:.4f} spent"
        if c.max_wall_s is not None and self.elapsed_s() >= c.max_wall_s:
            return "max_wall_s", f"{self.elapsed_s():.1f} s of {c.max_wall_s:.1f} s elapsed"
        return None

    def admit(self) -> None:
        """Count one new call, or raise BudgetExhausted if any budget is spent."""
        with self._lock:
            if self._exhausted is None:
                self._exhausted = self._reason()
            if self._exhausted is not None:
                raise BudgetExhausted(*self._exhausted)
            self.calls += 1

    def check(self) -> None:
        """Raise BudgetExhausted if a budget is spent, without counting a call."""
        with self._lock:
            if self._exhausted is None:
                self._exhausted = self._reason()
            if self._exhausted is not None:
                raise BudgetExhausted(*self._exhausted)

    def charge(self, *, prompt_tokens: int, completion_tokens: int, cost_usd: float) -> None:
        """Add a finished call's usage."""
        with self._lock:
            self.prompt_tokens += int(prompt_tokens)
            self.completion_tokens += int(completion_tokens)
            self.cost_usd += float(cost_usd)

    def snapshot(self) -> BudgetSnapshot:
        with self._lock:
            return BudgetSnapshot(calls=self.calls, prompt_tokens=self.prompt_tokens,
                                  completion_tokens=self.completion_tokens,
                                  cost_usd=self.cost_usd, elapsed_s=self.elapsed_s(),
                                  exhausted_by=self._exhausted[0] if self._exhausted else None)
