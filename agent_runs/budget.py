"""The payload budget: no orchestration/activity payload and no custom status may exceed 16 KB.

Durable history stores every activity input and output and replays them on every episode; keeping each one small
(references to stored messages, never their content) keeps replay cost flat however long a run gets.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel
from pydantic_core import to_json

PAYLOAD_BUDGET_BYTES = 16 * 1024
# The custom status keeps a margin below 16 KB: Azure Storage's Durable provider refuses a larger one outright.
CUSTOM_STATUS_BUDGET_BYTES = 12 * 1024
PayloadT = TypeVar("PayloadT", BaseModel, dict[str, Any], list[Any])


class PayloadBudgetExceeded(ValueError):
    """A payload that would break the history-size rule; a bug in the caller, never silently truncated."""


def payload_size(payload: BaseModel | dict[str, Any] | list[Any] | None) -> int:
    if payload is None:
        return 0
    if isinstance(payload, BaseModel):
        return len(payload.model_dump_json().encode())
    return len(to_json(payload))


def within_budget(payload: PayloadT, what: str, budget: int = PAYLOAD_BUDGET_BYTES) -> PayloadT:
    """Return `payload` unchanged, or raise if its JSON form is larger than the budget."""
    checked_size(payload, what, budget)
    return payload


def checked_size(payload: BaseModel | dict[str, Any] | list[Any], what: str, budget: int = PAYLOAD_BUDGET_BYTES) -> int:
    """The size of `payload`'s JSON form in bytes; raises if it is larger than the budget."""
    size = payload_size(payload)
    if size > budget:
        raise PayloadBudgetExceeded(f"{what} is {size} bytes; the durable payload budget is {budget} bytes")
    return size
