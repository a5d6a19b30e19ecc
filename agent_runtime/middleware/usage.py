"""Usage accounting: sum the tokens of every model call into a ledger, optionally refusing calls over a budget."""

from __future__ import annotations

from collections import defaultdict

from ..messages import Usage
from .contexts import ChatContext
from .pipeline import CallNext


class UsageBudgetExceeded(RuntimeError):
    """The run (or agent) already used its token budget; no further model call is made."""


class UsageLedger:
    """Totals per key (the run id, or the agent name when there is no run)."""

    def __init__(self) -> None:
        self._totals: dict[str, Usage] = defaultdict(Usage)
        self._calls: dict[str, int] = defaultdict(int)

    def record(self, key: str, usage: Usage) -> Usage:
        self._totals[key] = self._totals[key] + usage
        self._calls[key] += 1
        return self._totals[key]

    def total(self, key: str) -> Usage:
        return self._totals.get(key, Usage())

    def calls(self, key: str) -> int:
        return self._calls.get(key, 0)


class UsageAccountingMiddleware:
    def __init__(self, ledger: UsageLedger | None = None, *, max_total_tokens: int | None = None) -> None:
        self.ledger = ledger or UsageLedger()
        self.max_total_tokens = max_total_tokens

    async def process(self, context: ChatContext, call_next: CallNext) -> None:
        key = context.run_id or context.agent_name or "default"
        spent = self.ledger.total(key).total_tokens
        if self.max_total_tokens is not None and spent >= self.max_total_tokens:
            raise UsageBudgetExceeded(f"token budget of {self.max_total_tokens} used up ({spent} tokens spent)")
        await call_next()
        if context.result is not None and context.result.usage is not None:
            context.metadata["usage_total"] = self.ledger.record(key, context.result.usage)
