"""A workflow cancel that races the ends of runs: the workflow (or one of its child runs) finishes between the cancel
route's read and its cancel, and a cancel comes between the workflow's record and its orchestration's start.

Timing is made exact from inside the app: a run finishes "right after the route read it" when the route's read
answers with the record as it was just before the run finished (what a read a moment earlier gave); a cancel comes
"before the orchestration started" when it is sent, through the API, from inside the start request's launch; a cancel
comes "while the workflow closes" when it is flagged (as the cancel route flags it first) between `workflow_finish`'s
read of the record and its write."""

from __future__ import annotations

import contextlib
import json
import sys
from datetime import timedelta
from typing import Any

import pytest
from store_outage import store_down
from test_workflow_crash_ring import both_waiting as branches_waiting
from test_workflow_crash_ring import crash, pending_approval
from workflow_helpers import child_run, decide, flagged_while_closing, settle, start, start_posting_first, view
from workflow_scripts import app_env, workflow_host

from devhost.engine.api import EngineClosedError
from durable_steps import OUTAGE_RETRIES
from session_store import RunRecord, SessionStore

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
    with flags_refused(store_, bob) as refused:
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


def flags_refused(store: SessionStore, run_id: str) -> contextlib.AbstractContextManager[list[str]]:
    """While open, the store refuses to flag run `run_id` cancelled (a 503 from Cosmos); yields the refusals."""
    return store_down(store, "update_run", when=lambda changed, **changes: (
        changed == run_id and changes.get("cancel_requested_at") is not None))


def both_waiting(host, name: str = "parallel_mail_flow") -> tuple[str, str, str, dict[str, str]]:
    """A `name` workflow whose branches bob and carol each wait for their email's approval: (workflow, bob, carol,
    each child's pending approval)."""
    run_id, bob, carol = branches_waiting(host, name)
    return run_id, bob, carol, {child: pending_approval(host, child) for child in (bob, carol)}


def assert_all_cancelled(host, run_id: str, approvals: dict[str, str]) -> None:
    """The workflow and its children ended cancelled, their approvals closed, no email sent."""
    store_ = _store(host)
    assert all(host.get_status(r)["runtimeStatus"] in TERMINAL for r in (run_id, *approvals))
    assert [child_run(host, r, r)["status"] for r in approvals] == ["cancelled"] * len(approvals)
    ended = view(host, run_id)
    assert (ended["status"], ended["error"]["code"]) == ("cancelled", "cancelled"), ended
    for child, approval_id in approvals.items():
        assert host.run(store_.list_effects(child, kind="email")) == []
        assert host.run(store_.get_approval(approval_id)).status == "expired"


def test_a_workflow_keeps_cancelling_a_child_while_the_store_refuses_its_flag(host) -> None:
    """The store refuses bob's flag for five minutes, far longer than the activity's own retries (three, 2 s apart):
    the workflow tries its cancel of the children again on a timer until it is done, and every run ends cancelled
    with no client polling anything (before: the step failed `activity_failed`, and bob, never told, waited for his
    approval, up to a day, the workflow over)."""
    run_id, bob, _, approvals = both_waiting(host)
    with flags_refused(_store(host), bob) as refused:
        assert host.client.post(f"/api/workflows/runs/{run_id}/cancel").status_code == 202
        settle(host)
        for _ in range(10):
            host.advance(30)
            settle(host)
        assert host.get_status(run_id)["customStatus"]["status"] == "cancelling"
    assert len(refused) > 6  # the route's, then the activity's three tries per round
    for _ in range(10):  # the workflow's next try, on its timer
        host.advance(60)
        settle(host)
        if host.get_status(run_id)["runtimeStatus"] in TERMINAL:
            break
    assert_all_cancelled(host, run_id, approvals)


def test_a_workflow_that_gave_up_cancelling_a_child_waits_for_it_and_a_poll_cancels_it(host) -> None:
    """The store refuses bob's flag for hours: the workflow gives up trying (after about an hour) but does not end
    with bob still running; it stays `cancelling`, and the next poll of it, the store back, cancels bob."""
    run_id, bob, _, approvals = both_waiting(host)
    def tries() -> list[str]:
        return [e["EventType"] for e in host.get_status(run_id, show_history=True)["historyEvents"]
                if e.get("FunctionName") == "workflow_flag_children_cancelled"]

    rounds = len(OUTAGE_RETRIES) + 1
    with flags_refused(_store(host), bob):
        assert host.client.post(f"/api/workflows/runs/{run_id}/cancel").status_code == 202
        settle(host)
        for _ in range(400):  # a minute at a time: each try's retry (2 s on) and each round's wait come due
            host.advance(60)
            settle(host)
        assert tries() == ["TaskFailed"] * 3 * rounds  # each round: the activity's three tries; then no more
    assert host.get_status(run_id)["runtimeStatus"] == "Running"
    assert host.get_status(run_id)["customStatus"]["status"] == "cancelling"
    assert view(host, run_id)["status"] == "cancelling"  # this poll cancels bob
    settle(host)
    assert_all_cancelled(host, run_id, approvals)


def test_a_workflow_cancelled_while_the_store_is_down_at_every_close_ends_with_its_children_once_it_is_back(
    host,
) -> None:
    """The store refuses every close for ten minutes after the cancel (each child's, then the workflow's): the runs
    wait on durable timers and try again, so once the store is back every record is closed `cancelled`, with no
    client polling the workflow or its children (before: each orchestration crashed with its record open)."""
    run_id, _, _, approvals = both_waiting(host)
    with store_down(_store(host), "finish_run") as refused:
        assert host.client.post(f"/api/workflows/runs/{run_id}/cancel").status_code == 202
        settle(host)
        for _ in range(10):
            host.advance(60)
            settle(host)
        assert {host.get_status(r)["runtimeStatus"] for r in (run_id, *approvals)} == {"Running"}
    assert len(refused) > 6
    for _ in range(100):
        host.advance(60)
        settle(host)
        if host.get_status(run_id)["runtimeStatus"] in TERMINAL:
            break
    record = host.run(_store(host).get_run(run_id))
    assert record is not None and record.status == "cancelled", record  # closed by the workflow itself
    assert_all_cancelled(host, run_id, approvals)


def test_a_fail_fast_step_keeps_cancelling_a_branch_while_the_store_refuses_its_flag(host) -> None:
    """Carol's orchestration crashes, so the fail-fast step cancels bob, while the store refuses bob's flag for five
    minutes: the step tries again on a timer until bob is cancelled, then fails naming carol (before: it failed at
    once, `activity_failed`, with bob still waiting for his approval, the workflow over)."""
    run_id, bob, carol, approvals = both_waiting(host, "parallel_mail_fail_fast_flow")
    with flags_refused(_store(host), bob):
        crash(host, carol)
        settle(host)
        for _ in range(10):
            host.advance(30)
            settle(host)
        assert host.get_status(run_id)["runtimeStatus"] == "Running"
    for _ in range(10):  # the step's next try, on its timer
        host.advance(60)
        settle(host)
        if host.get_status(run_id)["runtimeStatus"] in TERMINAL:
            break
    failed = view(host, run_id)
    assert failed["status"] == "failed" and f"'{carol}'" in failed["error"]["message"], failed
    assert child_run(host, bob, bob)["status"] == "cancelled"
    assert host.run(_store(host).list_effects(bob, kind="email")) == []
    assert host.run(_store(host).get_approval(approvals[bob])).status == "expired"


@pytest.mark.parametrize("killed_at", [1, 2, 3, 4, 5])
def test_a_workflow_cancel_whose_host_is_killed_mid_way_cancels_every_child_once_restarted(
    tmp_path, model, killed_at: int
) -> None:
    """As above (the store refuses bob's flag), and the engine dies as the `killed_at`-th activity after the cancel
    commits, its work done and its result lost: in the engine's order, the workflow's cancel of its children, a
    child's close, that cancel's retries, the other child's close. Started again on the same state (the store back),
    the activity runs again and every run ends cancelled, with no client polling anything."""
    env = app_env(model, SESSION_STORE_PATH=str(tmp_path / "sessions.sqlite3"))
    state = tmp_path / "devhost.sqlite3"
    with workflow_host(env, state) as host:
        run_id, bob, _, approvals = both_waiting(host)
        with flags_refused(_store(host), bob):
            host.engine.options.faults.crash_at = {"activity_before_commit"}
            host.engine.options.faults.crash_after = killed_at
            response = host.client.post(f"/api/workflows/runs/{run_id}/cancel")
            assert response.status_code == 202, response.text
            with pytest.raises(EngineClosedError):
                settle(host)
                for _ in range(4):  # the workflow's cancel of bob retries on its timer
                    host.advance(30)
                    settle(host)
        assert host.engine.crashed
    with workflow_host(env, state) as host:
        for _ in range(20):  # activities in flight at the kill run again, and retry on the (virtual) clock
            host.advance(15)
            settle(host)
            if host.get_status(run_id)["runtimeStatus"] in TERMINAL:
                break
        assert_all_cancelled(host, run_id, approvals)
