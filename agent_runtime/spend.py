"""Cost control: what a run may spend (`RunBudget`) and what model calls cost (`ModelPrices`).

Not to be confused with `agent_runs.budget`, the 16 KB *payload* budget of Durable history.

A budget has three independent limits. The sans-IO loop (`agent_runtime.loop`) checks them before every model call:
once a limit is reached the run ends `completed` with reason `budget_exceeded` and keeps its partial answer, so the
in-process runner and durable runs stop at exactly the same point. A call that starts under the limit runs to its
end: the token and cost limits can be overshot by that one call, never by a second one.

An agent sets its budget (`AgentDefinition(budget=RunBudget(...))`); a request may only tighten it
(`RunBudget.tightened_by`): asking for more than the agent allows is refused (`BudgetAboveAgentLimitError`).

What is counted: every model call attempt the provider reported usage for, the failed ones too (an answer that
broke after its usage arrived, an answer stored by an activity attempt that then failed: the provider billed them).
An attempt that failed before the provider reported usage cannot be counted. An answer without any `usage` (some
OpenAI-compatible servers omit it) is estimated at `CHARS_PER_TOKEN` characters a token of what was sent and
received, and the run's usage says `estimated: true`.

Prices come from the `MODEL_PRICES` setting: JSON `{"<model>": {"input": <per 1M tokens>, "output": <per 1M>}}`, in
whatever currency the operator uses. A call whose model has no price is not priced (its cost stays unknown, so a
`max_cost` limit does not count it).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from .messages import Usage

BUDGET_LIMITS = ("max_total_tokens", "max_model_calls", "max_cost")
CHARS_PER_TOKEN = 4  # the usual rule of thumb for English text and JSON with OpenAI's tokenizers


def estimated_usage(prompt_chars: int, completion_chars: int) -> Usage:
    """The usage of a call whose provider reported none, from the characters it was sent and answered (rounded up:
    a budget is better overshot on paper than in the bill)."""
    prompt, completion = -(-prompt_chars // CHARS_PER_TOKEN), -(-completion_chars // CHARS_PER_TOKEN)
    return Usage(input_tokens=prompt, output_tokens=completion, total_tokens=prompt + completion, estimated=True)


class RunBudget(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # Strict: a limit is a number, never `true` (1) or "5" as pydantic's lax mode would take them (a request's typo
    # would then set a budget no one meant). A float limit still takes an integer (`"max_cost": 2`).
    max_total_tokens: int | None = Field(
        default=None, ge=1, strict=True, description="input + output tokens of all model calls"
    )
    max_model_calls: int | None = Field(default=None, ge=1, strict=True, description="model calls of the run")
    max_cost: float | None = Field(
        default=None, gt=0, strict=True, description="cost at MODEL_PRICES (unpriced calls count 0)"
    )

    @property
    def unlimited(self) -> bool:
        return all(getattr(self, limit) is None for limit in BUDGET_LIMITS)

    def tightened_by(self, request: RunBudget | None) -> RunBudget:
        """This (the agent's) budget with the request's limits applied; a request may only lower a limit or set one
        the agent leaves open. Raises `BudgetAboveAgentLimitError` naming the first limit it tries to raise."""
        if request is None:
            return self
        merged = {}
        for limit in BUDGET_LIMITS:
            mine, asked = getattr(self, limit), getattr(request, limit)
            if asked is not None and mine is not None and asked > mine:
                raise BudgetAboveAgentLimitError(limit, asked, mine)
            merged[limit] = asked if asked is not None else mine
        return RunBudget(**merged)

    def exceeded(self, usage: Usage, model_calls: int) -> str | None:
        """The limit another model call would cross (already reached), or None when the run may call the model."""
        if self.max_model_calls is not None and model_calls >= self.max_model_calls:
            return f"max_model_calls {self.max_model_calls} reached ({model_calls} calls)"
        if self.max_total_tokens is not None and usage.total_tokens >= self.max_total_tokens:
            return f"max_total_tokens {self.max_total_tokens} reached ({usage.total_tokens} tokens)"
        if self.max_cost is not None and (usage.cost or 0.0) >= self.max_cost:
            return f"max_cost {self.max_cost:g} reached ({usage.cost or 0.0:g})"
        return None


class BudgetAboveAgentLimitError(ValueError):
    def __init__(self, limit: str, asked: float, allowed: float) -> None:
        super().__init__(f"{limit} {asked:g} is above the agent's limit of {allowed:g}; a request may only lower it")
        self.limit = limit


class ModelPrice(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0, description="price per 1M input tokens")
    output: float = Field(ge=0, description="price per 1M output tokens")


_PRICE_TABLE = TypeAdapter(dict[str, ModelPrice])


class ModelPrices:
    """Prices per model; `cost_of` prices one call's usage."""

    def __init__(self, prices: dict[str, ModelPrice] | None = None) -> None:
        self._prices = dict(prices or {})

    @classmethod
    def parse(cls, text: str | None) -> ModelPrices:
        """From the `MODEL_PRICES` JSON (empty or None: nothing priced). Raises ValueError when malformed."""
        if not text or not text.strip():
            return cls()
        try:
            return cls(_PRICE_TABLE.validate_python(json.loads(text)))
        except ValueError as error:
            raise ValueError(f"MODEL_PRICES is not a JSON object of {{model: {{input, output}}}}: {error}") from error

    def __bool__(self) -> bool:
        return bool(self._prices)

    def price_for(self, models: Iterable[str | None]) -> ModelPrice | None:
        """The first candidate name with a price; a dated response model (`gpt-4o-mini-2024-07-18`) also matches
        its family's price (`gpt-4o-mini`) by the longest priced prefix."""
        names = [m for m in models if m]
        for name in names:
            if name in self._prices:
                return self._prices[name]
        for name in names:
            prefixes = [p for p in self._prices if name.startswith(f"{p}-")]
            if prefixes:
                return self._prices[max(prefixes, key=len)]
        return None

    def cost_of(self, usage: Usage | None, *models: str | None) -> float | None:
        price = self.price_for(models)
        if usage is None or price is None:
            return None
        return (usage.input_tokens * price.input + usage.output_tokens * price.output) / 1_000_000


__all__ = [
    "BUDGET_LIMITS",
    "CHARS_PER_TOKEN",
    "BudgetAboveAgentLimitError",
    "ModelPrice",
    "ModelPrices",
    "RunBudget",
    "estimated_usage",
]
