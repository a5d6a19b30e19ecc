"""Continuation tokens stay cursors, and are bound to the principal they were issued to.

A token's subject is its run or session; the cursor also names the owner (`p`) the token was issued for, and
`check_bound` refuses it from anyone else (401 `token_foreign`), whatever route it is presented to. Tokens issued
before owners were recorded carry no `p` and stay valid for the run's or session's owner.
"""

from __future__ import annotations

from typing import Any

from agent_runtime.approvers import ANONYMOUS

PRINCIPAL_FIELD = "p"


def bound_to(owner_id: str | None) -> dict[str, str]:
    """The cursor entry binding a token to the owner it is issued for (only the owner gets a run's tokens)."""
    return {PRINCIPAL_FIELD: owner_id or ANONYMOUS}


def bound_principal(cursor: dict[str, Any]) -> str | None:
    value = cursor.get(PRINCIPAL_FIELD)
    return value if isinstance(value, str) else None
