"""Who may see and do what: ownership and approver checks over store records (one place for every route).

- The principal that created a session, an agent run or a workflow run owns it and sees everything of it.
- Anyone else gets 404 on it (existence is not revealed), except a permitted approver, who sees the approvals they
  may decide (and the run's id, agent and status on them) and may decide them.
- In `AUTH_MODE=none` the single principal (`anonymous`) owns what it creates and is trusted as every approver.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, NamedTuple

from pydantic import Field

from agent_runtime.approvers import ANONYMOUS, may_decide
from http_api.caller import current_principal
from http_api.identity import CREDENTIAL_FIELDS, Principal
from http_api.problems import ApiProblem, not_found
from session_store import ApprovalRecord, ApprovalStatus, RunRecord, SessionStore
from session_store.rules import is_unwritten_start


async def stored_run(store: SessionStore, run_id: str) -> RunRecord | None:
    """The run `run_id` as every run route finds it: None when absent, or when its record is the one the store
    closed in place of a start that never stored it (`rules.is_unwritten_start`). That record is kept only to stop
    a late write of the run from landing (and expires a day on); it is no run anyone started - its request failed,
    or it was a fork whose copy is deleted - so the routes say `run_not_found` and lists leave it out, as an
    `Idempotency-Key` takes it for absent (`idempotency._run_exists`)."""
    run = await store.get_run(run_id)
    return None if run is None or is_unwritten_start(run) else run


def owns(principal: Principal, owner_id: str | None) -> bool:
    """Records written before owners were recorded (no owner) belong to the no-auth principal."""
    return principal.id == (owner_id or ANONYMOUS)


def can_decide(principal: Principal, approval: ApprovalRecord, run_owner_id: str | None) -> bool:
    owner_id = approval.owner_id or run_owner_id
    if principal.trusted:
        return owns(principal, owner_id)
    return may_decide(
        approval.approvers,
        separation_of_duties=approval.separation_of_duties,
        owner_id=owner_id,
        principal_id=principal.id,
        roles=principal.roles,
    )


# What the caller may do with an approval, as views show it (`approval_rights`: the decide route's own checks).
Decidable = Annotated[bool, Field(description="the caller may decide this approval now (approve or reject)")]
Editable = Annotated[
    bool,
    Field(description="the caller may approve it with edited arguments (never a workflow's gate, nor a call under "
                      "separation of duties)"),
]


class ApprovalRights(NamedTuple):
    decidable: bool
    editable: bool


def approval_rights(principal: Principal, record: ApprovalRecord, run: RunRecord, *, now: datetime) -> ApprovalRights:
    """What `principal` may do with `record` of `run` now: the same checks the decide route makes (who may decide,
    whether it is still open, whether its arguments may change), so a view never offers what the route refuses."""
    decidable = is_open(record, run, now=now) and can_decide(principal, record, run.owner_id)
    return ApprovalRights(decidable=decidable, editable=decidable and edit_refusal(record) is None)


RightsKey = tuple[str, ...]


def rights_key(principal: Principal) -> RightsKey:
    """All of `principal` that `approval_rights` depends on: views built for one caller tell every caller with the same
    key what they may do (a run's shared stream watcher is one per key; its owner's tokens may hold other roles)."""
    # A tuple, not a joined string: a role holding the separator would make another role set's key.
    return (principal.id, principal.auth_type, *sorted(principal.roles))


def rights_field(key: RightsKey) -> str | None:
    """The request field the caller of `key` came in (their credential, whose roles are in the key)."""
    return CREDENTIAL_FIELDS.get(key[1]) if len(key) > 1 else None


def is_open(record: ApprovalRecord, run: RunRecord | None, *, now: datetime) -> bool:
    """Whether the approval can still be decided: pending, before its deadline, in a run that has not finished and
    whose cancel was not requested (a flagged run ends `cancelled` without applying a decision)."""
    expired = record.expires_at is not None and record.expires_at <= now
    over = run is not None and (run.finished or run.cancel_requested_at is not None)
    return record.status == "pending" and not expired and not over


def edit_refusal(record: ApprovalRecord) -> ApiProblem | None:
    """Why the approval may not be approved with other arguments (by anyone), or None when it may.
    - A workflow's approval gate is a yes/no sign-off: its arguments (step, message, approver) describe the request,
      nothing runs with them, so an edit would be silently dropped.
    - Under separation of duties a call is decided as it was asked for. An approver who changed it would be the maker
      of the call they approve (Carol, a payments approver, approving Alice's payment re-addressed to herself):
      exactly the one-person action the rule exists to prevent."""
    if record.workflow_gate:
        return ApiProblem(
            422,
            "arguments_not_editable",
            "A workflow's approval gate has no arguments to edit",
            "Approve or reject the gate as it was asked for (a reason can go with either decision).",
            field="body.arguments",
        )
    if record.separation_of_duties:
        return ApiProblem(
            403,
            "edit_not_allowed",
            "This approval cannot be approved with other arguments",
            "Its tool keeps separation of duties: approve or reject the call as it was asked for (reject with a "
            "reason to have it asked again).",
            field="body.arguments",
        )
    return None


async def visible_approvals(
    store: SessionStore, run_id: str, *, status: ApprovalStatus | None = None
) -> tuple[RunRecord, list[ApprovalRecord]]:
    """A run's approvals as the caller may see them: all of them for the owner, those they may decide for an
    approver; 404 `run_not_found` for anyone else."""
    caller = current_principal()
    run = await stored_run(store, run_id)
    if run is None:
        raise not_found("run_not_found", "Run", run_id, field="path.run_id")
    records = await store.list_approvals(run_id=run.run_id, session_id=run.session_id, status=status)
    if owns(caller, run.owner_id):
        return run, records
    mine = [record for record in records if can_decide(caller, record, run.owner_id)]
    if not mine:
        raise not_found("run_not_found", "Run", run_id, field="path.run_id")
    return run, mine


async def decidable_approval(store: SessionStore, run_id: str, approval_id: str) -> tuple[RunRecord, ApprovalRecord]:
    """The run and the approval the caller wants to decide: 404 unless they own the run or may decide the approval,
    403 `not_an_approver` when they own the run but may not decide this approval (approvers, separation of duties).
    """
    caller = current_principal()
    run = await stored_run(store, run_id)
    # An approval of this run lives in its session: read it there (no lookup read; one elsewhere is not found).
    record = await store.get_approval(approval_id, session_id=run.session_id) if run is not None else None
    if record is not None and run is not None and record.run_id != run.run_id:
        record = None
    owner = run is not None and owns(caller, run.owner_id)
    allowed = record is not None and run is not None and can_decide(caller, record, run.owner_id)
    if run is None or not (owner or allowed):
        raise not_found("run_not_found", "Run", run_id, field="path.run_id")
    if record is None:
        raise not_found("approval_not_found", "Approval", approval_id, field="path.approval_id")
    if not allowed:
        who = ", ".join(record.approvers) + (" (not the run's owner)" if record.separation_of_duties else "")
        raise ApiProblem(
            403,
            "not_an_approver",
            "You may not decide this approval",
            f"This approval is decided by: {who}.",
            field="path.approval_id",
        )
    return run, record
