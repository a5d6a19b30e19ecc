"""Response ids: `resp_<run_id>` for a run's first turn, `resp_<run_id>_<n>` for turn n (n >= 2).

A run pauses when it asks for approvals; each pause ends a *turn* (the response ends `completed` with
`mcp_approval_request` items, as OpenAI's do). The client answers with `previous_response_id` and the SAME durable run
continues as the next turn, which gets the next id. Ids are derived, not stored: the same answer sent twice maps to
the same response. Only runs with the ids this app gives (32 hex digits) are addressable here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PREFIX = "resp_"
_ID = re.compile(r"^resp_([0-9a-f]{32})(?:_([1-9][0-9]{0,5}))?$")


@dataclass(frozen=True)
class ResponseRef:
    run_id: str
    turn: int = 1

    @property
    def response_id(self) -> str:
        return f"{PREFIX}{self.run_id}" if self.turn == 1 else f"{PREFIX}{self.run_id}_{self.turn}"

    def next(self) -> ResponseRef:
        return ResponseRef(self.run_id, self.turn + 1)


def parse_response_id(value: str) -> ResponseRef | None:
    match = _ID.match(value)
    if match is None:
        return None
    turn = int(match.group(2)) if match.group(2) else 1
    if turn == 1 and match.group(2):
        return None  # `_1` is spelled without a suffix: one spelling per response
    return ResponseRef(match.group(1), turn)
