"""Who may decide an approval: the rule shared by tool approvals and workflow approval gates (pure, no I/O).

An approver entry is `"owner"` (the principal that started the run), `"role:<app role>"` (any principal holding that
role) or a principal id. `separation_of_duties` forbids the run's owner to decide, whatever else matches.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

OWNER = "owner"
# The principal of AUTH_MODE=none, and the owner of records written before owners were recorded.
ANONYMOUS = "anonymous"
ROLE_PREFIX = "role:"
DEFAULT_APPROVERS: tuple[str, ...] = (OWNER,)


def check_approvers(approvers: Iterable[str]) -> list[str]:
    """The approver entries, validated (non-empty strings, at least one); raises ValueError naming the bad one."""
    entries = list(approvers)
    if not entries:
        raise ValueError("approvers must name at least one approver ('owner', 'role:<role>' or a principal id)")
    for entry in entries:
        if not isinstance(entry, str) or not entry.strip() or entry == ROLE_PREFIX:
            raise ValueError(f"approver {entry!r} must be 'owner', 'role:<role>' or a principal id")
    return entries


def principal_key(principal_id: str) -> str:
    return f"principal:{principal_id}"


def role_key(role: str) -> str:
    return f"{ROLE_PREFIX}{role}"


def decider_keys(approvers: Sequence[str], owner_id: str | None) -> list[str]:
    """The index keys an approval is found by in an inbox (`principal:<id>` / `role:<role>`): stored on the record
    so a store can query "approvals I may decide" without knowing the rule. `separation_of_duties` is applied after
    the query (the owner may match by role and still be excluded)."""
    keys: list[str] = []
    for entry in approvers:
        if entry == OWNER:
            key = principal_key(owner_id) if owner_id else None
        elif entry.startswith(ROLE_PREFIX):
            key = entry
        else:
            key = principal_key(entry)
        if key is not None and key not in keys:
            keys.append(key)
    return keys


def caller_keys(principal_id: str, roles: Iterable[str]) -> list[str]:
    """The keys a caller matches: their id and each of their roles."""
    return [principal_key(principal_id), *(role_key(r) for r in roles)]


def may_decide(
    approvers: Sequence[str],
    *,
    separation_of_duties: bool,
    owner_id: str | None,
    principal_id: str,
    roles: Iterable[str],
) -> bool:
    """Whether this principal may decide an approval with these approvers on a run owned by `owner_id`."""
    if separation_of_duties and owner_id is not None and principal_id == owner_id:
        return False
    mine = set(caller_keys(principal_id, roles))
    return any(key in mine for key in decider_keys(approvers, owner_id))


def inbox_keys(approvers: Sequence[str], owner_id: str | None) -> list[str]:
    """The keys stored on an approval record: the approvers' keys plus the owner's (the owner sees every approval of
    their runs, and an inbox filters with `may_decide` afterwards)."""
    keys = decider_keys(approvers, owner_id)
    if owner_id and principal_key(owner_id) not in keys:
        keys.append(principal_key(owner_id))
    return keys
