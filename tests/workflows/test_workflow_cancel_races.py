"""A workflow cancel that races the ends of runs: the workflow (or one of its child runs) finishes between the cancel
route's read and its cancel, and a cancel comes between the workflow's record and its orchestration's start.

Timing is made exact from inside the app: a run finishes "right after the route read it" when the route's read
answers with the record as it was just before the run finished (what a read a moment earlier gave); a cancel comes
"before the orchestration started" when it is sent, through the API, from inside the start request's launch; a cancel
comes "while the workflow closes" when it is flagged (as the cancel route flags it first) between `workflow_finish`'s
read of the record and its write."""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from typing import Any

import pytest
from workflow_helpers import child_run, decide, flagged_while_closing, settle, start, start_posting_first, view

from session_store import RunRecord, SessionStore, StoreUnavailableError

TERMINAL = {"Completed", "Failed", "Terminated", "Canceled"}
CANCELLED_BY_CLIENT = {"code": "cancelled", "message": "cancelled by the client", "step": None}  # as the event ends it


def _store(host) -> SessionStore:
    return sys.modules["agent_runs.services"].RunServices.current().store  # the host's modules: the app's store


def _kept_before_finishing(monkeypatch: pytest.MonkeyPatch, store: SessionStore, run_id: str) -> list[RunRecord]:
    """The run's record as it was just before it finished (filled in when it finishes)."""
    kept: list[RunRecord] = []
    finish_run = store.finish_run

    async def keeping(finished_id: str, *args: Any, **kwargs: Any) -> RunRecord:
        if finished_id == run_id and not kept:
            kept.append(await store.get_run(run_id))
        return await finish_run(finished_id, *args, **kwargs)

    monkeypatch.setattr(store, "finish_run", keeping)
    return kept


def _next_read_answers(monkeypatch: pytest.MonkeyPatch, store: SessionStore, before: RunRecord) -> None:
    """The store's next read of the run answers with `before`: the run finished right after that read."""
    assert not before.finished
    get_run = store.get_run
    stale = [before]

    async def reading(run_id: str, **kwargs: Any) -> RunRecord | None:
        if run_id == before.run_id and stale:
            return stale.pop()
        return await get_run(run_id, **kwargs)

    monkeypatch.setattr(store, "get_run", reading)


@pytest.mark.parametrize(
    ("route", "code"),
    [("/api/workflows/runs/{}/cancel", "workflow_finished"), ("/api/runs/{}/cancel", "run_finished")],
)
def test_a_cancel_the_workflow_outlives_by_finishing_is_a_409(host, monkeypatch, route: str, code: str) -> None:
    """The route read the workflow running, then it completed: its orchestration refuses the cancel event (410).
    The caller is told the workflow finished, not that it is being cancelled."""
    store = _store(host)
    run_id = start(host, "review_pipeline", {"topic": "a late cancel"})["run_id"]
    kept = _kept_before_finishing(monkeypatch, store, run_id)
    settle(host)
    [gate] = view(host, run_id)["pending_approvals"]
    decide(host, run_id, gate["approval_id"])
    settle(host)
    assert view(host, run_id)["status"] == "completed"

    _next_read_answers(monkeypatch, store, kept[0])
    late = host.client.post(route.format(run_id))

    assert late.status_code == 409, late.text
    assert late.headers["content-type"].startswith("application/problem+json")
    assert late.json()["code"] == code and "completed" in late.json()["detail"]
    assert view(host, run_id)["status"] == "completed"


def _event_held_back(monkeypatch: pytest.MonkeyPatch, run_id: str) -> None:
    """The workflow's cancel event waits until the test raises it: the workflow's own flagging of its children
    (`workflow_flag_children_cancelled`) must not be the first to read a child."""
    gateway = sys.modules["http_api.workflow_gateway"].WorkflowGateway
    send_cancel = gateway.send_cancel

    async def holding(self: Any, instance_id: str, reason: str) -> None:
        if instance_id != run_id:
            await send_cancel(self, instance_id, reason)

    monkeypatch.setattr(gateway, "send_cancel", holding)


def test_a_child_run_that_finished_meanwhile_is_not_listed_as_cancelled(host, monkeypatch) -> None:
    """The cancel read a child running, then it completed: only the child still running was cancelled."""
    store = _store(host)
    run_id = start(host, "parallel_wait_flow", {"topic": "a DPA"})["run_id"]
    legal_id = f"{run_id}.fan.legal"
    kept = _kept_before_finishing(monkeypatch, store, legal_id)
    settle(host)
    mailer, legal, _ = view(host, run_id)["active_step"]["child_runs"]
    assert legal == legal_id and child_run(host, legal, legal)["status"] == "completed"

    _next_read_answers(monkeypatch, store, kept[0])
    _event_held_back(monkeypatch, run_id)
    response = host.client.post(f"/api/workflows/runs/{run_id}/cancel")
    host.run(host.engine.raise_event(run_id, "cancel", json.dumps({"reason": "cancelled by the client"})))

    assert response.status_code == 202, response.text
    assert response.json()["cancelled_child_runs"] == [mailer]
    settle(host)
    assert view(host, run_id)["status"] == "cancelled"
    assert child_run(host, legal, legal)["status"] == "completed"
    assert child_run(host, mailer, mailer)["status"] == "cancelled"


def test_children_cancelled_before_the_workflow_hears_of_it_end_it_cancelled_not_failed(host, monkeypatch) -> None:
    """The cancel route flags the workflow, then cancels its children; when the children's ends reach the workflow
    before its own cancel event (held back here until they did), the workflow still ends cancelled: a child that
    ended cancelled because the workflow was cancelled is not a failed step."""
    run_id = start(host, "parallel_wait_flow", {"topic": "a DPA"})["run_id"]
    settle(host)
    mailer, legal, _ = view(host, run_id)["active_step"]["child_runs"]

    _event_held_back(monkeypatch, run_id)
    response = host.client.post(f"/api/workflows/runs/{run_id}/cancel")
    assert response.status_code == 202, response.text
    assert response.json()["cancelled_child_runs"] == [mailer]
    settle(host)  # the children ended and the workflow recorded its step: no cancel event reached it

    ended = view(host, run_id)
    assert ended["status"] == "cancelled", ended
    assert ended["error"]["code"] == "cancelled" and ended["steps"] == []  # no failed step: it did not finish
    assert child_run(host, mailer, mailer)["status"] == "cancelled"
    assert child_run(host, legal, legal)["status"] == "completed"
    assert host.get_status(run_id)["runtimeStatus"] in TERMINAL


def test_a_cancel_before_the_orchestration_started_ends_the_workflow_at_once(host, monkeypatch) -> None:
    """The cancel comes when the workflow's record exists but its orchestration does not yet (the host answers its
    event with a 404): the cancel is accepted on the stored flag, and the workflow, whose first step is a delay
    that never reads the flag, ends cancelled as soon as it starts rather than when its delay is over."""
    at = (host.engine.now() + timedelta(hours=1)).isoformat()
    cancel = lambda run_id: (f"/api/workflows/runs/{run_id}/cancel", None)  # noqa: E731
    run_id, answers = start_posting_first(host, monkeypatch, "signal_flow", {"at": at}, cancel)

    [answer] = answers
    assert answer.status_code == 202, answer.text
    assert answer.json() == {"run_id": run_id, "status": "cancelling", "cancelled_child_runs": []}
    settle(host)  # the clock stays: the delay is not over
    assert view(host, run_id)["status"] == "cancelled"
    assert host.get_status(run_id)["runtimeStatus"] in TERMINAL


def test_two_cancels_before_the_orchestration_started_end_the_workflow_once(host, monkeypatch) -> None:
    """A client that sends the cancel again (a lost answer) while the orchestration is still not started gets the
    same answer, and the workflow still ends cancelled once, as soon as it starts."""
    at = (host.engine.now() + timedelta(hours=1)).isoformat()
    cancel = lambda run_id: (f"/api/workflows/runs/{run_id}/cancel", None)  # noqa: E731
    run_id, answers = start_posting_first(host, monkeypatch, "signal_flow", {"at": at}, cancel, cancel)

    expected = {"run_id": run_id, "status": "cancelling", "cancelled_child_runs": []}
    assert [(a.status_code, a.json()) for a in answers] == [(202, expected)] * 2, [a.text for a in answers]
    settle(host)  # the clock stays: the delay is not over
    assert view(host, run_id)["status"] == "cancelled"
    assert host.get_status(run_id)["runtimeStatus"] in TERMINAL


def test_a_cancel_flagged_as_the_last_step_completed_ends_the_workflow_cancelled(host, monkeypatch) -> None:
    """The client's cancel had its 202 (the flag is written first), and the workflow's last step completed before
    the cancel event reached it: the workflow ends `cancelled`, as it does when the event comes first (it ended
    `completed` before, depending on which came first). The record, the orchestration's outcome and a later cancel's
    answer agree."""
    run_id = start(host, "review_pipeline", {"topic": "a cancel as it closes"})["run_id"]
    settle(host)
    [gate] = view(host, run_id)["pending_approvals"]
    flagged_while_closing(monkeypatch, run_id)
    decide(host, run_id, gate["approval_id"])
    settle(host)

    ended = view(host, run_id)
    assert (ended["status"], ended["error"]) == ("cancelled", CANCELLED_BY_CLIENT)
    assert ended["output"] is None
    state = host.get_status(run_id)
    assert state["runtimeStatus"] in TERMINAL
    assert (state["output"]["status"], state["output"]["reason"]) == ("cancelled", "cancelled by the client")
    again = host.client.post(f"/api/workflows/runs/{run_id}/cancel")  # over: a cancel now is told how it ended
    assert (again.status_code, again.json()["detail"]) == (409, "It is cancelled."), again.text


def test_a_step_that_failed_after_the_cancel_was_flagged_ends_the_workflow_cancelled(host, monkeypatch) -> None:
    """A step fails after the cancel was flagged: the workflow ends `cancelled`, not `failed`, and leaves no step to
    go on from (a rewind is for a failed workflow)."""
    run_id = start(host, "failing_flow", {})["run_id"]
    flagged_while_closing(monkeypatch, run_id)
    settle(host)

    ended = view(host, run_id)
    assert (ended["status"], ended["error"]) == ("cancelled", CANCELLED_BY_CLIENT)
    assert "resume" not in host.get_status(run_id)["output"]
    assert host.client.post(f"/api/workflows/runs/{run_id}/rewind").status_code == 409


@pytest.mark.parametrize("store", ["sqlite", pytest.param("cosmos", marks=pytest.mark.cosmos)])
def test_a_child_whose_cancel_the_route_could_not_flag_is_cancelled_by_the_workflow(request, store: str) -> None:
    """The cancel route flags the workflow and signals it, then cancels its children one by one, best effort: the
    store refused bob's flag (a 503 or 429 from Cosmos), so the route sent bob no event. The workflow's own cancel of
    its children (`workflow_flag_children_cancelled`, a retried activity) flags and signals bob, so bob stops waiting
    for his email's approval at once and the workflow ends cancelled - with no client polling it (before: bob, flagged
    but never told, waited for his approval, up to a day, and the workflow stayed `cancelling`)."""
    host = request.getfixturevalue("host" if store == "sqlite" else "cosmos_host")
    store_ = _store(host)
    run_id = start(host, "parallel_mail_flow", {"topic": "the launch"})["run_id"]
    settle(host)
    bob, carol = f"{run_id}.fan.bob", f"{run_id}.fan.carol"
    assert [child_run(host, r, r)["status"] for r in (bob, carol)] == ["requires_action"] * 2
    refused: list[str] = []
    update_run = store_.update_run

    async def refusing_bobs_flag(changed: str, **changes: Any) -> RunRecord:
        if changed == bob and changes.get("cancel_requested_at") is not None:
            refused.append(changed)
            raise StoreUnavailableError("Cosmos DB request failed: HTTP 503 (injected)")
        return await update_run(changed, **changes)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(store_, "update_run", refusing_bobs_flag)
        response = host.client.post(f"/api/workflows/runs/{run_id}/cancel")
        assert response.status_code == 202, response.text
        assert response.json()["cancelled_child_runs"] == [carol]  # bob's cancel failed here
        settle(host)  # the workflow's own cancel of bob was refused too: it waits on its retry's timer
    assert len(refused) == 2
    for _ in range(3):
        host.advance(30)  # its retry: no poll of the workflow or of bob repairs anything meanwhile
    assert [child_run(host, r, r)["status"] for r in (bob, carol)] == ["cancelled"] * 2
    assert not host.client.get(f"/api/runs/{bob}/approvals", params={"status": "pending"}).json()["approvals"]
    ended = view(host, run_id)
    assert (ended["status"], ended["error"]["code"]) == ("cancelled", "cancelled"), ended
    for child in (bob, carol):  # no email was sent
        assert host.run(store_.list_effects(child, kind="email")) == []
