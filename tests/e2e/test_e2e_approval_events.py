"""Decisions reach the run whatever their timing (issue: external events that are never lost).

The Python Durable SDK keeps one deferred event per name (a second overwrites the first) and replays it to every
later waiter of that name; decisions therefore ring one doorbell per approval and the run reads them from the store.
These tests put decisions where the old design lost them: many at once, before the run has recorded its requests,
while another decision or the expiry is being applied, together with a cancel, and across two rounds. Timing is
made exact by pausing the app's own store inside the step that must be in flight (`step_pause.paused`, which works
wherever the app runs), never by sleeping.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from typing import Any

import httpx
import pytest
from e2e_harness import InProcessApp, contents_of, parallel_calls, pending_ids, until_completed
from e2e_settings import watches_the_app_in_process
from httpx_sse import connect_sse
from step_pause import paused
from test_e2e_cancel import CANCELLED_BY_CLIENT, assert_every_call_has_a_result

from scripted_model import Reply, Script, ScriptedModelServer


def approve_while_the_hub_refuses_events(
    app: InProcessApp, monkeypatch: pytest.MonkeyPatch, run_id: str, approval_id: str
) -> httpx.Response:
    """An approval stored whose event the task hub refuses, as Azure's sometimes does (loopback never would)."""

    async def unreachable(instance_id: str, name: str, input_json: str | None) -> None:
        raise RuntimeError("the task hub is unreachable")

    with monkeypatch.context() as hub_down:
        hub_down.setattr(app.host.engine, "raise_event", unreachable)
        return app.decide(run_id, approval_id, "approve")


def emails(count: int, prefix: str = "user") -> list[dict[str, str]]:
    return [{"to": f"{prefix}{i}@example.com", "subject": "Hi", "body": f"Hello {i}"} for i in range(count)]


def app_module(name: str) -> Any:
    """A module as the host imported it (test modules must not import the app's packages themselves)."""
    return sys.modules[name]


def decide_together(app: InProcessApp, run_id: str, decisions: dict[str, dict[str, Any]]) -> list[httpx.Response]:
    """POST every decision at the same moment (one client and thread each, released together)."""
    barrier = threading.Barrier(len(decisions))

    def send(item: tuple[str, dict[str, Any]]) -> httpx.Response:
        approval_id, body = item
        with httpx.Client(base_url=app.host.base_url, timeout=60, trust_env=False) as client:
            barrier.wait()
            return client.post(f"/api/runs/{run_id}/approvals/{approval_id}", json=body)

    with ThreadPoolExecutor(len(decisions)) as pool:
        return list(pool.map(send, decisions.items()))


def assert_applied_once(app: InProcessApp, view: dict[str, Any], approved: list[dict[str, str]]) -> None:
    """The run completed, every approved email took effect once, and store, view and conversation agree."""
    final = app.view(view["run_id"])
    assert final["status"] == "completed", final
    assert final["pending_approvals"] == []
    sent = app.effects(view["session_id"], "email")
    assert sorted(e["to"] for e in sent) == sorted(e["to"] for e in approved)
    records = app.approvals(view["run_id"])
    assert all(r["status"] in ("approved", "rejected", "expired") for r in records), records
    responses = [
        m["contents"][0]["id"]
        for m in app.session_messages(view["session_id"], view["run_id"])
        if contents_of(m) == ["function_approval_response"]
    ]
    assert sorted(responses) == sorted(r["approval_id"] for r in records)  # each decision written once


@pytest.mark.parametrize("count", [4, 50])
def test_every_decision_of_a_batch_sent_at_once_is_applied(
    app: InProcessApp, model: ScriptedModelServer, count: int
) -> None:
    batch = emails(count)
    model.set_script(Script.of(parallel_calls("send_email", *batch), "All handled."))
    view = app.start_until_approval(input="email everyone")
    assert len(view["pending_approvals"]) == count
    by_approval = {p["approval_id"]: p["arguments"] for p in view["pending_approvals"]}
    decisions = {
        approval_id: {"decision": "approve"} if i % 3 else {"decision": "reject", "reason": f"not {i}"}
        for i, approval_id in enumerate(by_approval)
    }
    responses = decide_together(app, view["run_id"], decisions)
    assert [r.status_code for r in responses] == [202] * count, [r.text for r in responses if r.status_code != 202]
    app.settle()

    approved = [by_approval[a] for a, body in decisions.items() if body["decision"] == "approve"]
    assert_applied_once(app, view, approved)
    assert app.history(view["run_id"])["runtimeStatus"] == "Completed"


def test_decisions_that_arrive_before_the_run_recorded_its_requests(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    batch = emails(3)
    model.set_script(Script.of(parallel_calls("send_email", *batch), "Done."))
    with paused(app, "put_approvals") as recording:
        started = app.start(input="email three people")
        recording.wait_reached()  # the requests are stored; the step that stored them has not completed
        stored = app.approvals(started["run_id"])
        assert [a["status"] for a in stored] == ["pending"] * 3
        poll = app.view(started["run_id"])  # pollers already see them (from the store)
        assert sorted(pending_ids(poll)) == sorted(a["approval_id"] for a in stored)
        responses = decide_together(app, started["run_id"], {a["approval_id"]: {"decision": "approve"} for a in stored})
        assert [r.status_code for r in responses] == [202] * 3
    app.settle()
    assert_applied_once(app, started, batch)


def test_an_answer_shows_with_its_approval_requests_and_its_text_stays_the_draft(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    """While the run records its requests, polls do not show the answer's call as if it ran already (it shows with
    its requests), and the answer's text stays what they see as `partial_output`."""
    [email] = emails(1)
    answer = parallel_calls("send_email", email).model_copy(update={"text": "I will email them."})
    model.set_script(Script.of(answer, "Done."))
    with paused(app, "put_approvals") as recording:
        started = app.start(input="email one person")
        recording.wait_reached()
        during = app.view(started["run_id"])
        assert during["partial_output"] == "I will email them."
        assert not [u for u in during["updates"] if "function_call" in contents_of(u["message"])], during["updates"]
    view = app.wait_for(started["run_id"], ["requires_action"])
    assert view["partial_output"] is None
    shown = [contents_of(u["message"]) for u in view["updates"]]
    assert ["text", "function_call"] in shown and ["function_approval_request"] in shown, shown


def test_a_cancel_and_a_decision_while_the_hidden_answer_is_recorded(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    """The answer is hidden while its requests are recorded: a cancel and an approval arriving together in that
    window end the run cancelled (the cancel comes first), nothing is sent, and the finished run shows the answer
    with its call, once."""
    [email] = emails(1)
    model.set_script(Script.of(parallel_calls("send_email", email), "Done."))
    with paused(app, "put_approvals") as recording:
        started = app.start(input="email one person")
        recording.wait_reached()
        [approval] = app.approvals(started["run_id"])
        responses = decide_together(app, started["run_id"], {approval["approval_id"]: {"decision": "approve"}})
        assert [r.status_code for r in responses] == [202]
        assert app.cancel(started["run_id"]).status_code == 202
    final = app.wait_for(started["run_id"], ["cancelled"])
    assert app.effects(started["session_id"], "email") == []
    calls = [u for u in final["updates"] if "function_call" in contents_of(u["message"])]
    assert len(calls) == 1, final["updates"]


def test_a_decision_that_arrives_while_another_is_applied(app: InProcessApp, model: ScriptedModelServer) -> None:
    batch = emails(2)
    model.set_script(Script.of(parallel_calls("send_email", *batch), "Done."))
    view = app.start_until_approval()
    first, second = pending_ids(view)
    # The apply step lists the run's approvals (all of them); pollers list the pending ones only.
    with paused(app, "list_approvals", equal={"run_id": view["run_id"]}, absent=("status",)) as applying:
        assert app.decide(view["run_id"], first, "approve").status_code == 202
        applying.wait_reached()  # the run is applying the first decision
        assert app.decide(view["run_id"], second, "reject", reason="no").status_code == 202
    app.settle()
    assert_applied_once(app, view, [batch[0]])


def test_a_decision_that_arrives_during_the_expiry(app: InProcessApp, model: ScriptedModelServer) -> None:
    batch = emails(2)
    model.set_script(Script.of(parallel_calls("send_email", *batch), "Done."))
    view = app.start_until_approval()
    first, second = pending_ids(view)
    with paused(app, "decide_approval", equal={"status": "expired"}) as expiry:
        app.host.clock.advance(2 * 86400)  # the deadline passes: the expiry step starts
        expiry.wait_reached()  # it has expired the first approval and is about to do the second
        late = app.decide(view["run_id"], second, "approve")
        assert late.status_code == 202  # stored before the expiry step reached it: it wins
    app.settle()
    records = {r["approval_id"]: r["status"] for r in app.approvals(view["run_id"])}
    assert records == {first: "expired", second: "approved"}
    assert_applied_once(app, view, [batch[1]])


def test_approve_and_cancel_at_once(app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of(parallel_calls("send_email", *emails(2)), "Done."))
    view = app.start_until_approval()
    first, second = pending_ids(view)
    barrier = threading.Barrier(3)

    def send(request: tuple[str, str, dict[str, Any] | None]) -> int:
        method, path, body = request
        with httpx.Client(base_url=app.host.base_url, timeout=60, trust_env=False) as client:
            barrier.wait()
            return client.request(method, path, json=body).status_code

    run = f"/api/runs/{view['run_id']}"
    requests = [
        ("POST", f"{run}/approvals/{first}", {"decision": "approve"}),
        ("POST", f"{run}/approvals/{second}", {"decision": "approve"}),
        ("POST", f"{run}/cancel", None),
    ]
    with ThreadPoolExecutor(3) as pool:
        *decided, cancelled = list(pool.map(send, requests))
    # The cancel is accepted (flagged); a decision stored before the flag is accepted, one after it is refused (the
    # run ends cancelled: it takes no decision once flagged).
    assert cancelled == 202 and set(decided) <= {202, 409}, (decided, cancelled)
    app.settle()
    final = app.view(view["run_id"])
    # A graceful cancel lets the step in flight finish (decisions applied before the flag ran their emails), and the
    # accepted cancel is how the run ends. Whatever ran, ran once, only if its decision was accepted, and the session
    # is free again.
    assert final["status"] == "cancelled", final
    sent = app.effects(view["session_id"], "email")
    accepted = [email for email, code in zip(emails(2), decided, strict=True) if code == 202]
    assert len(sent) == len({e["to"] for e in sent}) and all(e in accepted for e in sent), (sent, decided)
    session = app.http.get(f"/api/sessions/{view['session_id']}").json()
    assert session.get("active_run_id") is None


def test_a_second_round_after_a_concurrent_first_round(app: InProcessApp, model: ScriptedModelServer) -> None:
    first_round, second_round = emails(3, "first"), emails(2, "second")
    model.set_script(
        Script.of(parallel_calls("send_email", *first_round), parallel_calls("send_email", *second_round), "Both done.")
    )
    view = app.start_until_approval()
    responses = decide_together(app, view["run_id"], {a: {"decision": "approve"} for a in pending_ids(view)})
    assert [r.status_code for r in responses] == [202] * 3
    app.settle()
    second = app.view(view["run_id"])
    assert second["status"] == "requires_action" and len(second["pending_approvals"]) == 2
    responses = decide_together(app, view["run_id"], {a: {"decision": "approve"} for a in pending_ids(second)})
    assert [r.status_code for r in responses] == [202] * 2
    app.settle()
    assert_applied_once(app, view, first_round + second_round)


def test_the_same_decision_sent_twice_is_delivered_again_and_applied_once(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    model.set_script(Script.of(Reply.call("send_email", emails(1)[0]), "Sent."))
    view = app.start_until_approval()
    [approval_id] = pending_ids(view)
    assert app.decide(view["run_id"], approval_id, "approve").status_code == 202
    assert app.decide(view["run_id"], approval_id, "approve").status_code == 202  # a retry: 202 again
    other = app.decide(view["run_id"], approval_id, "reject")
    assert (other.status_code, other.json()["code"]) == (409, "approval_already_decided")
    app.settle()
    assert_applied_once(app, view, emails(1))


def test_a_decision_whose_event_failed_reaches_the_run_at_the_next_poll(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Redeliver at the first poll after a failed delivery (the 5 s default is what `redeliver_stalled` is tested for
    # in tests/api); the task hub refuses the event as Azure's sometimes does, which loopback never would.
    with app_with(DECISION_REDELIVERY_SECONDS="0") as app:
        model.set_script(Script.of(parallel_calls("send_email", *emails(2)), "Done."))
        view = app.start_until_approval()
        first, second = pending_ids(view)

        refused = approve_while_the_hub_refuses_events(app, monkeypatch, view["run_id"], first)
        assert (refused.status_code, refused.json()["code"]) == (503, "decision_not_delivered")
        assert refused.headers["Retry-After"] == "1"
        app.settle()
        waiting = app.host.get_status(view["run_id"])  # the engine's own view: no poll has run yet
        assert waiting is not None
        assert sorted(waiting["customStatus"]["pending_approvals"]) == sorted([first, second])
        assert [a["status"] for a in app.approvals(view["run_id"]) if a["approval_id"] == first] == ["approved"]

        # Nobody repeats the request: the next poll delivers it.
        assert app.view(view["run_id"])["status"] == "requires_action"
        app.settle()
        assert pending_ids(app.view(view["run_id"])) == [second]
        assert app.decide(view["run_id"], second, "approve").status_code == 202
        app.settle()
        assert_applied_once(app, view, emails(2))


@watches_the_app_in_process
def test_a_decision_whose_run_finished_before_it_was_delivered_is_a_409(
    app: InProcessApp, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The decision is stored, then the run ends (a cancel) before its doorbell rings: the orchestration is gone and
    refuses the event. The decider is told the run finished (409), not to send the decision again (503): it will
    never be applied."""
    [email] = emails(1)
    model.set_script(Script.of(parallel_calls("send_email", email), "Done."))
    view = app.start_until_approval()
    [approval_id] = pending_ids(view)
    gateway = app_module("http_api.durable_gateway").DurableGateway
    send_approval = gateway.send_approval

    async def after_the_run_ended(self: Any, run_id: str, approval: str) -> None:
        await self.send_cancel(run_id, "cancelled meanwhile")
        await until_completed(self, run_id)
        await send_approval(self, run_id, approval)

    monkeypatch.setattr(gateway, "send_approval", after_the_run_ended)
    late = app.decide(view["run_id"], approval_id, "approve")
    monkeypatch.undo()

    assert (late.status_code, late.json()["code"]) == (409, "run_finished"), late.text
    assert app.view(view["run_id"])["status"] == "cancelled"
    assert app.effects(view["session_id"], "email") == []


def test_a_decision_whose_event_failed_reaches_the_run_a_stream_follows(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The page follows a run by its stream, and once decided an approval is no longer shown to be decided: a
    decision stored whose event never reached the run (refused here; or the API died between the two) must be rung
    again while a stream watches, as a poll would, or the run waits for its deadline with nothing left to click."""
    with app_with(DECISION_REDELIVERY_SECONDS="0", STREAM_PING_SECONDS="60") as app:  # no ping outlasts the read
        [email] = emails(1)
        model.set_script(Script.of(parallel_calls("send_email", email), "Done."))
        view = app.start_until_approval()
        [approval_id] = pending_ids(view)

        refused = approve_while_the_hub_refuses_events(app, monkeypatch, view["run_id"], approval_id)
        assert (refused.status_code, refused.json()["code"]) == (503, "decision_not_delivered")
        app.settle()

        # Nobody repeats the request and nobody polls: the stream is all that watches the run.
        with connect_sse(app.http, "GET", f"/api/runs/{view['run_id']}/stream", timeout=30) as source:
            done = [e.json() for e in source.iter_sse() if e.event == "done"]
        assert done[0]["status"] == "completed"
        assert_applied_once(app, view, [email])


def events_held_back(monkeypatch: pytest.MonkeyPatch, *kinds: str) -> list[str]:
    """The API's `kinds` of events ("approval", "cancel") are not raised meanwhile: they lag behind (events race, and
    the host may deliver one late). Returns the list of the events held, filled in as they are sent."""
    gateway = app_module("http_api.durable_gateway").DurableGateway
    held: list[str] = []

    async def approval(self: Any, run_id: str, approval_id: str) -> None:
        held.append("approval")

    async def cancel(self: Any, run_id: str, reason: str | None) -> None:
        held.append("cancel")

    for kind in kinds:
        monkeypatch.setattr(gateway, f"send_{kind}", {"approval": approval, "cancel": cancel}[kind])
    return held


def assert_cancelled_without_sending(app: InProcessApp, view: dict[str, Any]) -> None:
    assert app.effects(view["session_id"], "email") == []
    final = app.view(view["run_id"])
    assert (final["status"], final["error"]) == ("cancelled", CANCELLED_BY_CLIENT), final
    assert_every_call_has_a_result(app.session_messages(view["session_id"]))
    nxt = app.http.post("/api/agents/helper/runs", json={"input": "Anything else?", "session_id": view["session_id"]})
    assert nxt.status_code == 202, nxt.text  # the session is free


@watches_the_app_in_process
def test_a_decision_whose_event_comes_after_a_cancel_was_accepted_runs_nothing(
    app: InProcessApp, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Approved, then cancelled (202: the cancel is flagged on the run), and the decision's event reaches the run
    before the cancel's (its own held back here until the decider sent the same decision again; the cancel's never
    comes): a cancel the API accepted is how the run ends, so the approved email is not sent - the run ends
    `cancelled` with the cancel's reason, its call answered "not run", the session free (before, the email went out,
    then the run ended cancelled)."""
    [email] = emails(1)
    model.set_script(Script.of(parallel_calls("send_email", email), "Sent."))
    view = app.start_until_approval()
    [approval_id] = pending_ids(view)
    with monkeypatch.context() as lagging:
        held = events_held_back(lagging, "approval", "cancel")
        assert app.decide(view["run_id"], approval_id, "approve").status_code == 202
        assert app.cancel(view["run_id"]).status_code == 202
        lagging.undo()
        held_cancel = events_held_back(lagging, "cancel")
        again = app.decide(view["run_id"], approval_id, "approve")  # the same decision: its event is sent again
        app.settle()
    assert again.status_code == 202, again.text
    assert (held, held_cancel) == (["approval", "cancel"], [])
    assert_cancelled_without_sending(app, view)
    [approval] = app.approvals(view["run_id"])
    assert approval["status"] == "approved"  # as decided: the run was cancelled before it acted on it


@watches_the_app_in_process
def test_a_decision_after_a_cancel_was_accepted_is_a_409(
    app: InProcessApp, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cancel is flagged (202) and its event has not reached the run yet: the approval is no longer decidable
    (its view says so), and deciding it is 409 `run_finished` (a flagged run ends cancelled), nothing stored. The run
    ends cancelled once the cancel's event comes (a second cancel request sends it again), the approval expired."""
    [email] = emails(1)
    model.set_script(Script.of(parallel_calls("send_email", email), "Sent."))
    view = app.start_until_approval()
    [approval_id] = pending_ids(view)
    with monkeypatch.context() as lagging:
        events_held_back(lagging, "cancel")
        assert app.cancel(view["run_id"]).status_code == 202
        app.settle()
        assert [a["decidable"] for a in app.view(view["run_id"])["pending_approvals"]] == [False]
        refused = app.decide(view["run_id"], approval_id, "approve")
    assert (refused.status_code, refused.json()["code"]) == (409, "run_finished"), refused.text
    assert "cancel was requested" in refused.json()["detail"]
    assert [a["status"] for a in app.approvals(view["run_id"])] == ["pending"]  # nothing stored
    assert app.cancel(view["run_id"]).status_code == 202  # already flagged: its event is sent again
    app.settle()
    assert_cancelled_without_sending(app, view)
    assert [a["status"] for a in app.approvals(view["run_id"])] == ["expired"]


@watches_the_app_in_process
def test_a_cancel_whose_event_the_hub_refuses_is_a_503_and_a_poll_delivers_it(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The cancel is flagged but the task hub refuses its event: the caller is told to send it again (503
    `cancel_not_delivered`, not a 500), and the run no longer takes decisions (it ends cancelled). A client that
    gives up instead is repaired by the next poll of the run, as a stalled decision is: the run waits for a person, so
    without its event it would hold its session until its approval's deadline."""
    [email] = emails(1)
    model.set_script(Script.of(parallel_calls("send_email", email), "Sent."))
    with app_with(DECISION_REDELIVERY_SECONDS="0") as app:
        view = app.start_until_approval()
        [approval_id] = pending_ids(view)

        async def unreachable(instance_id: str, name: str, input_json: str | None) -> None:
            raise RuntimeError("the task hub is unreachable")

        with monkeypatch.context() as hub_down:
            hub_down.setattr(app.host.engine, "raise_event", unreachable)
            refused = app.cancel(view["run_id"])
            assert app.view(view["run_id"])["status"] == "requires_action"  # no poll gets through to it either
        assert (refused.status_code, refused.json()["code"]) == (503, "cancel_not_delivered"), refused.text
        assert refused.headers["Retry-After"] == "1"
        assert app.decide(view["run_id"], approval_id, "approve").status_code == 409
        app.view(view["run_id"])  # the hub is back: this poll rings the cancel again
        app.settle()
        assert_cancelled_without_sending(app, view)
        assert [a["status"] for a in app.approvals(view["run_id"])] == ["expired"]


@watches_the_app_in_process
def test_a_cancel_whose_event_the_hub_refused_reaches_the_run_a_stream_follows(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As above, with nobody polling: the page follows the run by its stream, and shows its approval no longer
    decidable once the cancel is flagged. The stream rings the cancel again, as it does a stalled decision."""
    [email] = emails(1)
    model.set_script(Script.of(parallel_calls("send_email", email), "Sent."))
    with app_with(DECISION_REDELIVERY_SECONDS="0", STREAM_PING_SECONDS="60") as app:
        view = app.start_until_approval()

        async def unreachable(instance_id: str, name: str, input_json: str | None) -> None:
            raise RuntimeError("the task hub is unreachable")

        with monkeypatch.context() as hub_down:
            hub_down.setattr(app.host.engine, "raise_event", unreachable)
            refused = app.cancel(view["run_id"])
        assert (refused.status_code, refused.json()["code"]) == (503, "cancel_not_delivered"), refused.text
        app.settle()

        with connect_sse(app.http, "GET", f"/api/runs/{view['run_id']}/stream", timeout=30) as source:
            done = [e.json() for e in source.iter_sse() if e.event == "done"]
        assert done[0]["status"] == "cancelled"
        assert_cancelled_without_sending(app, view)
