"""Notifications, end to end: signed webhooks (verified by a loopback receiver with the `standardwebhooks` library),
their durable delivery (a receiver down for hours of virtual time, 410, Retry-After), the run's delivery log and
redelivery, and per-run webhooks (only allowed hosts)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

import pytest
from e2e_harness import InProcessApp, pending_ids
from standardwebhooks import Webhook
from webhook_receiver import SECRET, WebhookReceiver

from scripted_model import Reply, Script, ScriptedModelServer

ROTATED_SECRET = "whsec_" + "dGhlLW5ldy1zZWNyZXQtYWZ0ZXItdGhlLXJvdGF0aW9uMTI="
EMAIL_BOB = {"to": "bob@example.com", "subject": "Hi", "body": "Hello Bob,\nsee you at 10.\nAlice"}


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    started = WebhookReceiver().start()
    yield started
    started.stop()


def webhook_settings(receiver: WebhookReceiver, **extra: str) -> dict[str, str]:
    return {"WEBHOOK_URLS": receiver.url, "WEBHOOK_SECRET": SECRET, "PUBLIC_BASE_URL": "https://agents.example.com",
            **extra}


def deliveries(app: InProcessApp, run_id: str) -> list[dict]:
    response = app.http.get(f"/api/runs/{run_id}/deliveries")
    assert response.status_code == 200, response.text
    return response.json()["deliveries"]


def test_every_transition_is_delivered_signed_in_order(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    receiver: WebhookReceiver,
) -> None:
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "Sent."))
    with app_with(**webhook_settings(receiver)) as app:
        view = app.start_until_approval()
        run_id = view["run_id"]
        [approval_id] = pending_ids(view)
        app.settle()
        [requested] = receiver.accepted()
        assert requested.verified  # standardwebhooks verified the signature and timestamp
        assert requested.payload["type"] == "approval.requested"
        data = requested.payload["data"]
        assert (data["approval_id"], data["run_id"], data["tool"], data["agent"]) == (
            approval_id, run_id, "send_email", "helper")
        assert data["expires_at"] and data["approvers"] == ["owner"]
        assert data["links"]["api"] == f"https://agents.example.com/api/runs/{run_id}/approvals/{approval_id}"
        assert data["links"]["page"].startswith(f"https://agents.example.com/api/ui/approvals/{approval_id}?link=")
        assert "arguments" not in data  # only with WEBHOOK_INCLUDE_ARGUMENTS
        assert SECRET not in requested.body

        assert app.decide(run_id, approval_id, "approve").status_code == 202
        app.settle()
        assert app.view(run_id)["status"] == "completed"
        got = receiver.accepted()
        assert all(d.verified for d in got)
        assert [d.payload["type"] for d in got] == ["approval.requested", "approval.decided", "run.completed"]
        assert got[1].payload["data"]["decision"] == "approved"
        assert len({d.headers["webhook-id"] for d in got}) == 3
        log = deliveries(app, run_id)
        assert [(d["type"], d["status"], len(d["attempts"])) for d in log] == [
            ("approval.requested", "delivered", 1), ("approval.decided", "delivered", 1),
            ("run.completed", "delivered", 1)]


def test_a_receiver_down_for_six_hours_gets_everything_in_order_after(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    receiver: WebhookReceiver,
) -> None:
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "Sent."))
    receiver.status = 503
    with app_with(**webhook_settings(receiver)) as app:
        view = app.start_until_approval()
        run_id = view["run_id"]
        [approval_id] = pending_ids(view)
        assert app.decide(run_id, approval_id, "approve").status_code == 202
        app.settle()
        assert app.view(run_id)["status"] == "completed"  # a receiver that is down never holds up the run
        for _ in range(6 * 6):  # six hours of virtual time, ten minutes at a time
            app.advance(600)
        assert receiver.accepted() == []
        tried = [d for d in receiver.deliveries]
        assert tried and {d.payload["type"] for d in tried} == {"approval.requested"}  # in order: the head waits
        assert len({d.headers["webhook-id"] for d in tried}) == 1  # the same webhook-id on every retry

        receiver.status = 200
        app.advance(3600)  # the backoff is capped at an hour
        got = receiver.accepted()
        assert [d.payload["type"] for d in got] == ["approval.requested", "approval.decided", "run.completed"]
        assert all(d.verified for d in got)
        assert got[0].headers["webhook-id"] == tried[0].headers["webhook-id"]
        [head, *_] = deliveries(app, run_id)
        assert head["status"] == "delivered" and len(head["attempts"]) == len(tried) + 1


def test_while_the_secret_is_rotated_receivers_holding_either_secret_verify(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    receiver: WebhookReceiver,
) -> None:
    """`WEBHOOK_SECRET=<new>,<previous>`: one `v1,` signature per secret (space-separated, as the specification has
    it for zero-downtime rotation), so a receiver still holding the previous secret verifies, as does one with the
    new."""
    model.set_script(Script.of("Hello."))
    with app_with(**webhook_settings(receiver, WEBHOOK_SECRET=f"{ROTATED_SECRET},{SECRET}")) as app:
        run_id = app.start()["run_id"]
        app.settle()
        [done] = receiver.accepted()
        assert done.verified  # by the receiver, which holds the previous secret
        assert Webhook(ROTATED_SECRET).verify(done.body, done.headers)["data"]["run_id"] == run_id
        assert [s[:3] for s in done.headers["webhook-signature"].split(" ")] == ["v1,", "v1,"]


def test_gone_stops_the_subscription_and_retry_after_is_honoured(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    receiver: WebhookReceiver,
) -> None:
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "Sent."))
    receiver.status, receiver.retry_after = 429, "7200"
    with app_with(**webhook_settings(receiver)) as app:
        view = app.start_until_approval()
        app.settle()
        assert len(receiver.deliveries) == 1
        app.advance(3600)  # backoff alone would have retried by now; the receiver asked for two hours
        assert len(receiver.deliveries) == 1
        receiver.status, receiver.retry_after = 410, None
        app.advance(3600)
        assert len(receiver.deliveries) == 2
        [approval_id] = pending_ids(view)
        assert app.decide(view["run_id"], approval_id, "approve").status_code == 202
        app.settle()
        app.advance(3600)
        assert len(receiver.deliveries) == 2  # 410: nothing more is sent to it for this run
        assert {d["status"] for d in deliveries(app, view["run_id"])} == {"stopped"}


def test_redeliver_sends_the_same_webhook_id_again(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    receiver: WebhookReceiver,
) -> None:
    model.set_script(Script.of("Hello."))
    with app_with(**webhook_settings(receiver)) as app:
        run_id = app.start()["run_id"]
        app.settle()
        [done] = receiver.accepted()
        assert done.payload["type"] == "run.completed"
        response = app.http.post(f"/api/runs/{run_id}/deliveries/{done.headers['webhook-id']}/redeliver")
        assert response.status_code == 202, response.text
        app.settle()
        again = receiver.accepted()
        assert len(again) == 2 and again[1].headers["webhook-id"] == done.headers["webhook-id"]
        assert again[1].verified
        unknown = app.http.post(f"/api/runs/{run_id}/deliveries/msg_unknown/redeliver")
        assert unknown.status_code == 404


def test_a_run_webhook_must_name_an_allowed_host(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    receiver: WebhookReceiver,
) -> None:
    model.set_script(Script.of("Hello."))
    with app_with(WEBHOOK_SECRET=SECRET, WEBHOOK_ALLOWED_HOSTS="127.0.0.1") as app:
        before = app.snapshot()
        refused = app.http.post("/api/agents/helper/runs",
                                json={"input": "hi", "webhook": "https://evil.example.net/hook"})
        assert refused.status_code == 400
        assert refused.json()["code"] == "webhook_not_allowed"
        assert refused.json()["field"] == "body.webhook"
        assert app.snapshot() == before  # nothing was started

        run_id = app.start(webhook=receiver.url)["run_id"]
        app.settle()
        [done] = receiver.accepted()
        assert done.verified and done.payload["data"]["run_id"] == run_id


def test_escalation_and_expiry_are_delivered(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    receiver: WebhookReceiver,
) -> None:
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "Not sent."))
    with app_with(**webhook_settings(receiver, WEBHOOK_EVENTS="approval.*")) as app:
        view = app.start_until_approval(agent="escalating")
        app.advance(600 + 1)  # the first deadline: handed to the supervisors, with a new deadline and page link
        app.advance(3600 + 1)  # nobody decided: expired (the agent's final action then fails the run)
        assert app.view(view["run_id"])["status"] == "failed"
        got = receiver.accepted()
        assert all(d.verified for d in got)
        assert [d.payload["type"] for d in got] == ["approval.requested", "approval.escalated", "approval.expired"]
        escalated = got[1].payload["data"]
        assert escalated["escalated_to"] == "role:Supervisors" and escalated["links"]["page"]
        assert escalated["expires_at"] > got[0].payload["data"]["expires_at"]
        # WEBHOOK_EVENTS=approval.*: run.completed was not recorded for this subscription
        assert [d["type"] for d in deliveries(app, view["run_id"])] == [
            "approval.requested", "approval.escalated", "approval.expired"]


def test_a_responses_api_run_takes_its_webhook_from_metadata(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    receiver: WebhookReceiver,
) -> None:
    model.set_script(Script.of("Hello."))
    with app_with(WEBHOOK_SECRET=SECRET, WEBHOOK_ALLOWED_HOSTS="127.0.0.1") as app:
        refused = app.http.post("/api/v1/responses", json={"model": "helper", "input": "hi",
                                                           "metadata": {"webhook": "https://evil.example.net/"}})
        assert refused.status_code == 400
        assert refused.json()["error"]["param"] == "metadata.webhook"
        answered = app.http.post("/api/v1/responses", json={"model": "helper", "input": "hi",
                                                            "metadata": {"webhook": receiver.url}})
        assert answered.status_code == 200, answered.text
        app.settle()
        [done] = receiver.accepted()
        assert done.verified and done.payload["type"] == "run.completed"


@pytest.fixture
def slack() -> Iterator[WebhookReceiver]:
    """Slack's incoming webhook: it is sent approval requests only."""
    started = WebhookReceiver().start()
    yield started
    started.stop()


def delivery_statuses(app: InProcessApp, run_id: str) -> dict[str, str]:
    """The runtime status of each subscription's delivery orchestration of the run."""
    keys = {d["subscription"] for d in deliveries(app, run_id)}
    return {key: app.history(f"notify-{key}-{run_id}")["runtimeStatus"] for key in keys}


def test_deliveries_end_with_the_run_for_subscriptions_that_skip_its_final_event(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    receiver: WebhookReceiver, slack: WebhookReceiver,
) -> None:
    """Slack is sent approval requests only, and `WEBHOOK_EVENTS` may leave out the run's end: their delivery
    orchestrations still end with the run, rather than wait for a wake-up forever (one more per run)."""
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "Sent."))
    with app_with(**webhook_settings(receiver, WEBHOOK_EVENTS="approval.*", SLACK_WEBHOOK_URL=slack.url)) as app:
        view = app.start_until_approval()
        run_id = view["run_id"]
        [approval_id] = pending_ids(view)
        app.settle()
        statuses = delivery_statuses(app, run_id)
        assert len(statuses) == 2 and set(statuses.values()) == {"Running"}  # waiting while the run waits

        assert app.decide(run_id, approval_id, "approve").status_code == 202
        app.settle()
        assert app.view(run_id)["status"] == "completed"
        assert receiver.types() == ["approval.requested", "approval.decided"] and len(slack.accepted()) == 1
        assert delivery_statuses(app, run_id) == {key: "Completed" for key in statuses}
