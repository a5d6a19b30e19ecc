"""Session ids the app keeps for its own records: no session id a client supplies may start with these prefixes.

Each prefix names partitions of the store that hold internal records, not a conversation:
- `idempotency.`: the ledger of one (principal, Idempotency-Key) (`http_api/idempotency.py`). A caller who could start
  a run in such a session and then delete it would wipe another caller's record, and that caller's retry would start
  a second run;
- `wf-`: a workflow's control session (its run record, approvals, journal and signals;
  `workflow_runtime/contracts.py`): a run started there would write into the journal the workflow reads back.

- `<run id>.`: the session of a workflow's child run (`<workflow run id>.<step>`, `activities/workflow_agents.py`):
  a caller who learned a workflow's run id and created that session first would make the step fail. Clients may
  not create such sessions; the workflow's owner still reads them by path.

A reserved id in a body is a 422 naming the field; in a path (but for child-run sessions, which their owner reads)
it is the route's own 404 (`http_api/path_ids.py`).
Records already written keep their ids: the prefixes stay where they were, only clients can no longer name them.
"""

from __future__ import annotations

import re

from workflow_runtime.contracts import CONTROL_SESSION_PREFIX

IDEMPOTENCY_PARTITION_PREFIX = "idempotency."
RESERVED_SESSION_PREFIXES: tuple[str, ...] = (IDEMPOTENCY_PARTITION_PREFIX, CONTROL_SESSION_PREFIX)
# Run ids are uuid4 hex (`http_api.run_lifecycle.claim_start`): a child run's session starts with one and a dot.
CHILD_RUN_SESSION = re.compile(r"^[0-9a-f]{32}\.", re.IGNORECASE)


def reserved_prefix(session_id: str) -> str | None:
    """The reserved prefix `session_id` starts with (compared case-insensitively: a store may not tell case apart)."""
    lowered = session_id.lower()
    return next((prefix for prefix in RESERVED_SESSION_PREFIXES if lowered.startswith(prefix)), None)


def refuse_reserved(session_id: str) -> str:
    """A pydantic validator of client-supplied session ids (in bodies: ids a session would be created with)."""
    prefix = reserved_prefix(session_id)
    if prefix is not None:
        raise ValueError(f"session ids starting with {prefix!r} are reserved for the app's own records")
    if CHILD_RUN_SESSION.match(session_id):
        raise ValueError("session ids starting with a run id and '.' are reserved for the child runs of workflows")
    return session_id
