"""`agentctl`'s prompt offers what the server says the caller may do with an approval: an edit of the arguments only
where it says `editable` (never a workflow's sign-off gate, never a call under separation of duties: the app refuses
those edits), and no prompt at all where it says the caller may not decide (`decidable: false`). A server too old to
say gets what agentctl did before: no edit for a gate (named `workflow_gate:<step>`), an edit for any other call."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

from agentctl.approve import decide_interactively

EDIT_PROMPT = "Approve (a), reject (r) or edit the arguments (e)?"
NO_EDIT_PROMPT = "Approve (a) or reject (r)?"
GATE = {
    "approval_id": "wf-1.sign_off.approval",
    "tool": "workflow_gate:sign_off",
    "arguments": {"step": "sign_off", "message": "Publish this draft?", "approver": "editor", "escalated": False},
}
PAYMENT = {"approval_id": "a-1", "tool": "pay", "arguments": {"to": "bob@example.com", "amount": 42}}


class RecordingClient:
    def __init__(self) -> None:
        self.decisions: list[tuple[Any, ...]] = []

    def decide(self, run_id: str, approval_id: str, decision: str, **options: Any) -> dict[str, Any]:
        self.decisions.append((run_id, approval_id, decision, options))
        return {}


def answering(monkeypatch, *answers: str) -> Console:
    monkeypatch.setenv("EDITOR", "false")  # were an editor opened, the edit would fail loudly
    console = Console(file=io.StringIO(), width=120)
    queued = iter(answers)
    monkeypatch.setattr(console, "input", lambda prompt="", **_: (console.print(prompt, end=""), next(queued))[1])
    return console


@pytest.mark.parametrize(
    "approval",
    [
        pytest.param({**GATE, "decidable": True, "editable": False}, id="gate"),
        pytest.param(GATE, id="gate-from-a-server-that-does-not-say"),
        pytest.param({**PAYMENT, "decidable": True, "editable": False}, id="separation-of-duties"),
    ],
)
def test_where_the_arguments_are_not_editable_it_is_approved_or_rejected_never_edited(monkeypatch, approval) -> None:
    console = answering(monkeypatch, "e", "a")  # "e" is no choice: asked again
    client = RecordingClient()

    assert decide_interactively(console, client, "r-1", approval) == "approved"  # type: ignore[arg-type]

    shown = console.file.getvalue()  # type: ignore[attr-defined]
    assert NO_EDIT_PROMPT in shown and "edit the arguments" not in shown
    assert client.decisions == [("r-1", approval["approval_id"], "approve", {})]


@pytest.mark.parametrize(
    "approval",
    [
        pytest.param({**PAYMENT, "decidable": True, "editable": True}, id="editable"),
        pytest.param(PAYMENT, id="a-call-from-a-server-that-does-not-say"),
    ],
)
def test_where_the_arguments_are_editable_an_edit_is_offered(monkeypatch, approval) -> None:
    console = answering(monkeypatch, "a")
    client = RecordingClient()

    assert decide_interactively(console, client, "r-1", approval) == "approved"  # type: ignore[arg-type]

    assert EDIT_PROMPT in console.file.getvalue()  # type: ignore[attr-defined]


def test_an_approval_the_caller_may_not_decide_is_shown_not_asked(monkeypatch) -> None:
    """The requester of a payment under separation of duties, following their run: it waits for someone else."""
    console = answering(monkeypatch)  # any question would fail: nothing queued
    client = RecordingClient()

    outcome = decide_interactively(console, client, "r-1", {**PAYMENT, "decidable": False, "editable": False})

    assert outcome == "not_decidable" and client.decisions == []
    shown = console.file.getvalue()  # type: ignore[attr-defined]
    assert "Approval needed" in shown and "Not yours to decide now" in shown and "Approve (a)" not in shown


def test_an_approval_that_becomes_the_callers_to_decide_is_asked_then(monkeypatch) -> None:
    """Following their run, the owner is first told a call waits for another approver (a payments approver decides
    it); at its first deadline it is escalated to a role the owner holds, and the stream's next `status` says it is
    now theirs to decide: they are asked then (an approval is asked once, but shown as waiting is not asked)."""
    from agentctl import attach
    from agentctl.events import Done, Status

    waiting = {**PAYMENT, "decidable": False, "editable": False}
    escalated = {**PAYMENT, "decidable": True, "editable": True, "escalated_to": "role:Supervisors"}
    events = [Status("requires_action", [waiting]), Status("requires_action", [escalated]),
              Status("requires_action", [escalated]), Done({"status": "completed", "run_id": "r-1"})]
    monkeypatch.setattr(attach, "follow", lambda client, view, workflow=False: iter(events))
    console = answering(monkeypatch, "a")  # one question, for the escalated call: a second would fail
    client = RecordingClient()

    attachment = attach.Attachment(console, client, interactive=True)  # type: ignore[arg-type]
    attachment.run({"run_id": "r-1", "status": "requires_action"})

    shown = console.file.getvalue()  # type: ignore[attr-defined]
    assert "Not yours to decide now" in shown and EDIT_PROMPT in shown
    assert client.decisions == [("r-1", "a-1", "approve", {})]


def test_a_session_that_cannot_prompt_points_to_the_inbox_only_where_the_approval_is_the_callers(monkeypatch) -> None:
    """Exit 4 with a hint: `agentctl approvals` where the caller may decide; where the app says they may not (their
    own payment, under separation of duties) their inbox would be empty: they are told it waits for another."""
    from agentctl import attach
    from agentctl.events import Status
    from agentctl.exit_codes import WAITING_FOR_APPROVAL

    for approval, hint in (({**PAYMENT, "decidable": False, "editable": False}, "Waiting for another approver"),
                           ({**PAYMENT, "decidable": True, "editable": False}, "Decide with: agentctl approvals"),
                           (PAYMENT, "Decide with: agentctl approvals")):  # a server too old to say
        events = [Status("requires_action", [approval])]
        monkeypatch.setattr(attach, "follow", lambda client, view, workflow=False, events=events: iter(events))
        console = answering(monkeypatch)
        client = RecordingClient()
        client.poll = lambda run_id, workflow=False: {"run_id": run_id, "status": "requires_action"}  # type: ignore[attr-defined]

        attachment = attach.Attachment(console, client, interactive=False)  # type: ignore[arg-type]
        assert attachment.run({"run_id": "r-1", "status": "requires_action"}) == WAITING_FOR_APPROVAL

        assert hint in console.file.getvalue()  # type: ignore[attr-defined]
