"""A workflow's notifications: started with its own `webhook` (an allowed host), the shipped review pipeline sends
`workflow.gate_opened` (with the decision page's link), `approval.decided` and `workflow.completed`, in order, each
verified by the loopback receiver with the `standardwebhooks` library."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from workflow_helpers import decide, flagged_while_closing, settle, start, view
from workflow_scripts import FIXTURES_DIR, REPO_ROOT, TEST_WORKFLOWS_PACKAGE, stop_host

from devhost.testing import InProcessHost
from scripted_model.server import ScriptedModelServer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))  # the receiver the e2e tests use
from event_outage import events_refused, wait_on_its_backoff
from fixture_agents import store_pause
from never_started import WORKFLOW, stored_never_started
from webhook_checks import CHANGES
from webhook_receiver import SECRET, WebhookReceiver

START = "/api/workflows/review_pipeline/runs"


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    started = WebhookReceiver().start()
    yield started
    started.stop()


@pytest.fixture
def notifying_host(model: ScriptedModelServer, tmp_path: Path) -> Iterator[InProcessHost]:
    if str(FIXTURES_DIR) not in sys.path:
        sys.path.insert(0, str(FIXTURES_DIR))
    env = {"SCRIPTED_MODEL_URL": str(model.base_url), "SESSION_STORE_PATH": ":memory:",
           "WORKFLOWS_PACKAGE": TEST_WORKFLOWS_PACKAGE, "CONTINUATION_TOKEN_SECRET": "workflow-tests-secret",
           "MODEL_RETRY_MAX_ATTEMPTS": "1", "WEBHOOK_SECRET": SECRET, "WEBHOOK_ALLOWED_HOSTS": "127.0.0.1",
           "E2E_MARKER_DIR": str(tmp_path)}
    app = InProcessHost(REPO_ROOT, clock="virtual", env=env)
    app.start()
    try:
        yield app
    finally:
        stop_host(app)


def test_a_workflow_with_its_own_webhook(notifying_host: InProcessHost, receiver: WebhookReceiver) -> None:
    host = notifying_host
    refused = host.client.post("/api/workflows/review_pipeline/runs",
                               json={"input": {"topic": "x"}, "webhook": "https://elsewhere.example.org/x"})
    assert refused.status_code == 400 and refused.json()["field"] == "body.webhook"

    run_id = start(host, "review_pipeline", {"topic": "durable agents"}, webhook=receiver.url)["run_id"]
    settle(host)
    [opened] = receiver.accepted()
    assert opened.verified and opened.payload["type"] == "workflow.gate_opened"
    gate = opened.payload["data"]
    assert (gate["run_id"], gate["tool"], gate["agent"]) == (run_id, "workflow_gate:sign_off", "review_pipeline")
    assert gate["links"]["page"].startswith(f"/api/ui/approvals/{gate['approval_id']}?link=")

    decide(host, run_id, gate["approval_id"])
    settle(host)
    got = receiver.accepted()
    assert all(d.verified for d in got)
    assert [d.payload["type"] for d in got] == ["workflow.gate_opened", "approval.decided", "workflow.completed"]
    assert {d.payload["data"]["run_id"] for d in got} == {run_id}  # the child runs' events are not the workflow's


def test_a_workflow_ended_by_its_flagged_cancel_announces_that_end(
    notifying_host: InProcessHost, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its cancel was flagged as its last step completed (the cancel event still on its way): the final event is
    the cancelled end the record holds (`workflow.failed`, status `cancelled`), not `workflow.completed`."""
    host = notifying_host
    run_id = start(host, "review_pipeline", {"topic": "durable agents"}, webhook=receiver.url)["run_id"]
    settle(host)
    [opened] = receiver.accepted()
    flagged_while_closing(monkeypatch, run_id)
    decide(host, run_id, opened.payload["data"]["approval_id"])
    settle(host)
    got = receiver.accepted()
    assert [d.payload["type"] for d in got] == ["workflow.gate_opened", "approval.decided", "workflow.failed"]
    end = got[-1].payload["data"]
    assert (end["status"], end["error"]["code"]) == ("cancelled", "cancelled")


@pytest.mark.parametrize("change", CHANGES)
def test_a_workflow_key_retry_answers_with_its_run_whatever_its_webhook_check_says_now(
    notifying_host: InProcessHost, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    """Since the workflow started with its webhook, the host no longer resolves (or was revoked): the key's retry
    answers with the run as a poll would (it starts nothing, so checks nothing), where a new start is refused."""
    host = notifying_host
    body = {"input": {"topic": "durable agents"}, "webhook": receiver.url}
    headers = {"Idempotency-Key": uuid.uuid4().hex}
    first = host.client.post(START, json=body, headers=headers)
    assert first.status_code == 202, first.text
    settle(host)
    CHANGES[change](sys.modules.__getitem__, monkeypatch)
    refused = host.client.post(START, json=body)
    assert refused.status_code == 400 and refused.json()["field"] == "body.webhook", refused.text
    again = host.client.post(START, json=body, headers=headers)
    assert again.status_code == 202, again.text
    assert again.json()["run_id"] == first.json()["run_id"]
    [opened] = receiver.accepted()
    assert opened.payload["type"] == "workflow.gate_opened"


@pytest.mark.parametrize("change", CHANGES)
def test_a_workflow_key_retry_starts_the_run_its_first_request_stored_whatever_its_webhook_check_says_now(
    notifying_host: InProcessHost, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    """The first request checked the webhook, stored the workflow's run, then died before starting it. The key's
    retry takes the start over and starts it: with the webhook when only its host's look-up fails now (each send
    looks it up again), without it when the host was revoked - never a refusal that leaves it written and never
    started for good (a start is taken over once)."""
    host = notifying_host
    body = {"input": {"topic": "durable agents"}, "webhook": receiver.url}
    headers = {"Idempotency-Key": uuid.uuid4().hex}
    stored_never_started(sys.modules.__getitem__, monkeypatch,
                         lambda: host.client.post(START, json=body, headers=headers), WORKFLOW)
    CHANGES[change](sys.modules.__getitem__, monkeypatch)
    retried = host.client.post(START, json=body, headers=headers)
    assert retried.status_code == 202, retried.text
    settle(host)
    run = view(host, retried.json()["run_id"])
    assert run["status"] == "requires_action", run  # the gate: the workflow ran
    opened = [d.payload["type"] for d in receiver.accepted()]
    assert opened == (["workflow.gate_opened"] if change == "unresolvable" else [])


def test_a_workflow_s_events_whose_recording_fails_for_good_are_recorded_once_the_store_is_back(
    notifying_host: InProcessHost, receiver: WebhookReceiver
) -> None:
    """The store refused the events of the gate's decision and of the workflow's end, through every retry of their
    recordings: both were dropped, and `workflow.completed` never reached the receiver. Each is recorded again on a
    durable timer until the store takes it: every event, in order, once."""
    host = notifying_host
    run_id = start(host, "review_pipeline", {"topic": "durable agents"}, webhook=receiver.url)["run_id"]
    settle(host)
    [opened] = receiver.accepted()
    store_pause.install()  # on the store classes as this host imported them (the workflows' app loads no test agents)
    with events_refused(host):
        decide(host, run_id, opened.payload["data"]["approval_id"])
        for _ in range(6):  # an hour of the store refusing them
            host.advance(600)
        assert len(receiver.accepted()) == 1

    for _ in range(2):
        host.advance(3600)  # the recording's backoff is capped at an hour
    got = receiver.accepted()
    assert all(d.verified for d in got)
    assert [d.payload["type"] for d in got] == ["workflow.gate_opened", "approval.decided", "workflow.completed"]
    assert len({d.headers["webhook-id"] for d in got}) == 3


def test_a_workflow_waiting_to_record_its_gate_s_events_is_cancelled_promptly(
    notifying_host: InProcessHost, receiver: WebhookReceiver
) -> None:
    """The store refused the opened gate's events: the workflow waited on the recording's timer and did not act on
    a cancel until the store took them. The wait races the cancel now: the workflow ends `cancelled` at once, and its
    end is recorded and delivered once the store is back (the given-up gate's event never: the cancel closed it)."""
    host = notifying_host
    store_pause.install()
    with events_refused(host):
        run_id = start(host, "review_pipeline", {"topic": "durable agents"}, webhook=receiver.url)["run_id"]
        for _ in range(6):  # an hour of the store refusing them
            host.advance(600)
        assert view(host, run_id)["status"] != "cancelled"
        assert host.client.post(f"/api/workflows/runs/{run_id}/cancel").status_code == 202
        settle(host)  # no timer fires
        assert view(host, run_id)["status"] == "cancelled"
        assert receiver.deliveries == []

    for _ in range(2):
        host.advance(3600)
    got = receiver.accepted()
    assert [(d.payload["type"], d.payload["data"]["status"]) for d in got] == [("workflow.failed", "cancelled")]
    assert got[0].verified and host.wait_for_status(run_id)["runtimeStatus"] == "Completed"
    assert given_up(host, run_id) == [("approvals", "cancelled")]  # in its delivery log, not only a warning


def given_up(host: InProcessHost, run_id: str) -> list[tuple[str, str]]:
    """The recordings of the run's events given up (`notifications.hooks`) and why, from its delivery log."""
    noted = host.client.get(f"/api/runs/{run_id}/deliveries").json()["given_up"]
    return [(g["what"], g["why"]) for g in noted]


@pytest.mark.parametrize("outcome", ["decided", "expired"])
def test_a_cancel_while_a_workflow_waits_to_record_its_gate_s_outcome_ends_it_cancelled(
    notifying_host: InProcessHost, receiver: WebhookReceiver, outcome: str
) -> None:
    """The gate (the last step) was decided, or its deadline passed (it escalates then), and the store refused the
    outcome's events; a cancel wins the recording's wait, which gives those events up for it. The workflow takes the
    cancel there and ends `cancelled`, as the cancel asked: not `completed` after giving its events up for a cancel
    it did not take, and without opening an escalation gate (an approval for the editor-in-chief of a workflow
    being cancelled)."""
    host = notifying_host
    run_id = start(host, "review_pipeline", {"topic": "durable agents"}, webhook=receiver.url)["run_id"]
    settle(host)
    [opened] = receiver.accepted()
    store_pause.install()
    with events_refused(host):
        if outcome == "decided":
            decide(host, run_id, opened.payload["data"]["approval_id"])
        else:
            host.advance(86400)  # the gate's deadline
        wait_on_its_backoff(host, run_id)
        assert host.client.post(f"/api/workflows/runs/{run_id}/cancel").status_code == 202
        settle(host)  # no timer fires
        assert view(host, run_id)["status"] == "cancelled"

    host.advance(600)
    approvals = host.client.get(f"/api/runs/{run_id}/approvals").json()["approvals"]
    assert [a["approval_id"] for a in approvals] == [opened.payload["data"]["approval_id"]]
    got = receiver.accepted()
    assert [(d.payload["type"], d.payload["data"].get("status")) for d in got] == [
        ("workflow.gate_opened", "pending"), ("workflow.failed", "cancelled")]
    assert host.wait_for_status(run_id)["runtimeStatus"] == "Completed"
    assert given_up(host, run_id) == [("approvals", "cancelled")]
