"""Slack, end to end: the Block Kit message per approval (to a loopback "incoming webhook"), and the interaction route
with requests signed exactly as Slack signs them (`v0=` HMAC-SHA256 over `v0:{timestamp}:{body}`, computed here by
hand, not by the library the app uses). Forged, stale and replayed requests decide nothing; Slack and the API deciding
the same approval at once: one wins, the other is told who decided; a click after the run was cancelled decides
nothing."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from e2e_harness import InProcessApp, pending_ids
from webhook_receiver import WebhookReceiver

from scripted_model import Reply, Script, ScriptedModelServer

SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
ROUTE = "/api/integrations/slack/interactions"
# Slack wants its answer within 3 s. The test's bound is looser, so that a loaded machine cannot fail it: what it must
# catch is an answer that waits for `response_url`, which the receiver holds until the test releases it (the old code
# waited there until its 10 s timeout).
SLACK_ACK_SECONDS = 8.0
EMAIL = {"to": "bob@example.com", "subject": "Hi", "body": "Hello Bob"}


@pytest.fixture
def store_backend() -> str:
    return "sqlite"


@pytest.fixture
def slack() -> Iterator[WebhookReceiver]:
    """Slack's incoming webhook (the channel's messages)."""
    started = WebhookReceiver().start()
    yield started
    started.stop()


@pytest.fixture
def responses() -> Iterator[WebhookReceiver]:
    """The interaction's `response_url` (updates of the message, ephemeral replies)."""
    started = WebhookReceiver().start()
    yield started
    started.stop()


def slack_settings(slack: WebhookReceiver, **extra: str) -> dict[str, str]:
    return {"SLACK_WEBHOOK_URL": slack.url, "SLACK_SIGNING_SECRET": SIGNING_SECRET, "SLACK_APPROVERS": "U111=anonymous",
            "WEBHOOK_INCLUDE_ARGUMENTS": "true", **extra}


def signed(body: str, *, secret: str = SIGNING_SECRET, timestamp: int | None = None) -> dict[str, str]:
    ts = str(int(time.time()) if timestamp is None else timestamp)
    signature = "v0=" + hmac.new(secret.encode(), f"v0:{ts}:{body}".encode(), hashlib.sha256).hexdigest()
    return {"content-type": "application/x-www-form-urlencoded", "x-slack-request-timestamp": ts,
            "x-slack-signature": signature}


def click(message: dict[str, Any], action_id: str, responses: WebhookReceiver, user: str = "U111") -> str:
    """The form body Slack posts when `user` clicks a button of `message`."""
    actions = next(b for b in message["blocks"] if b["type"] == "actions")
    button = next(e for e in actions["elements"] if e["action_id"] == action_id)
    payload = {"type": "block_actions", "user": {"id": user, "username": "someone"}, "response_url": responses.url,
               "message": message,
               "actions": [{"action_id": action_id, "block_id": actions["block_id"], "value": button["value"],
                            "type": "button"}]}
    return urlencode({"payload": json.dumps(payload)})


def approval_message(app: InProcessApp, slack: WebhookReceiver) -> dict[str, Any]:
    app.settle()
    [message] = slack.accepted()
    return message.payload


def test_approve_in_slack(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    slack: WebhookReceiver, responses: WebhookReceiver,
) -> None:
    model.set_script(Script.of(Reply.call("send_email", EMAIL), "Sent."))
    with app_with(**slack_settings(slack)) as app:
        view = app.start_until_approval()
        run_id, [approval_id] = view["run_id"], pending_ids(view)
        message = approval_message(app, slack)
        assert "send_email" in message["text"]
        assert "bob@example.com" in json.dumps(message["blocks"])  # the arguments (WEBHOOK_INCLUDE_ARGUMENTS)
        body = click(message, "approve", responses)
        answer = app.http.post(ROUTE, content=body, headers=signed(body))
        assert answer.status_code == 200, answer.text
        app.settle()
        assert app.view(run_id)["status"] == "completed"
        [record] = app.approvals(run_id)
        assert (record["approval_id"], record["status"], record["decided_by"]) == (approval_id, "approved", "anonymous")
        [update] = responses.accepted()
        assert update.payload["replace_original"] is True
        assert "Approved by anonymous (in Slack)" in update.payload["text"]
        assert not any(b["type"] == "actions" for b in update.payload["blocks"])  # no buttons left
        assert [e["source"] for e in app.effects(view["session_id"], "decision_source")] == ["slack"]


def test_slack_is_answered_at_once_and_a_slow_response_url_still_gets_the_update(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    slack: WebhookReceiver, responses: WebhookReceiver,
) -> None:
    """The message's update once went to `response_url` before Slack was answered: a slow `response_url` held the
    answer past Slack's three seconds (the person who clicked saw an error). Now Slack is answered with the decision
    applied while `response_url` still holds the update, and the update goes out durably: refused once (503), it is
    sent again on a durable timer."""
    model.set_script(Script.of(Reply.call("send_email", EMAIL), "Sent."))
    with app_with(**slack_settings(slack)) as app:
        view = app.start_until_approval()
        run_id = view["run_id"]
        body = click(approval_message(app, slack), "approve", responses)
        responses.hold()
        responses.status = 503

        def from_slack() -> httpx.Response:
            with httpx.Client(base_url=app.host.base_url, timeout=60) as http:
                return http.post(ROUTE, content=body, headers=signed(body))

        with ThreadPoolExecutor(1) as pool:
            answer = pool.submit(from_slack).result(timeout=SLACK_ACK_SECONDS)
        assert (answer.status_code, answer.json()) == (200, {"ok": True, "status": "approved"})
        assert responses.deliveries == []  # nothing answered yet: the receiver holds what reached it
        assert [a["status"] for a in app.approvals(run_id)] == ["approved"]

        responses.release()
        app.settle()
        assert [d.answered for d in responses.deliveries] == [503]
        responses.status = 200
        app.advance(60)
        [update] = responses.accepted()
        assert update.payload["replace_original"] is True
        assert "Approved by anonymous (in Slack)" in update.payload["text"]
        assert app.view(run_id)["status"] == "completed"


def test_forged_stale_replayed_and_unmapped_requests_decide_nothing(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    slack: WebhookReceiver, responses: WebhookReceiver,
) -> None:
    model.set_script(Script.of(Reply.call("send_email", EMAIL), "Not sent."))
    with app_with(**slack_settings(slack)) as app:
        view = app.start_until_approval()
        run_id = view["run_id"]
        message = approval_message(app, slack)
        body = click(message, "approve", responses)
        forged = app.http.post(ROUTE, content=body, headers=signed(body, secret="not-the-secret"))
        stale = app.http.post(ROUTE, content=body, headers=signed(body, timestamp=int(time.time()) - 6 * 60))
        tampered = app.http.post(ROUTE, content=body.replace("approve", "reject"), headers=signed(body))
        unsigned = app.http.post(ROUTE, content=body, headers={"content-type": "application/x-www-form-urlencoded"})
        for refused in (forged, stale, tampered, unsigned):
            assert refused.status_code == 401, refused.text
            assert refused.json()["code"] == "slack_signature_invalid"
        stranger = click(message, "approve", responses, user="U999")
        assert app.http.post(ROUTE, content=stranger, headers=signed(stranger)).json()["ok"] is False
        app.settle()
        assert [a["status"] for a in app.approvals(run_id)] == ["pending"]

        reject = click(message, "reject", responses)
        headers = signed(reject)
        assert app.http.post(ROUTE, content=reject, headers=headers).json()["status"] == "rejected"
        replayed = app.http.post(ROUTE, content=reject, headers=headers)  # the same request, inside the window
        assert replayed.json() == {"ok": False, "code": "slack_request_replayed"}
        app.settle()
        [record] = app.approvals(run_id)
        assert (record["status"], record["reason"]) == ("rejected", "Rejected in Slack by anonymous")


def test_slack_and_the_api_decide_at_once(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    slack: WebhookReceiver, responses: WebhookReceiver,
) -> None:
    model.set_script(Script.of(Reply.call("send_email", EMAIL), "Done."))
    with app_with(**slack_settings(slack)) as app:
        view = app.start_until_approval()
        run_id, [approval_id] = view["run_id"], pending_ids(view)
        body = click(approval_message(app, slack), "approve", responses)
        base = app.host.base_url
        both = threading.Barrier(2)

        def from_slack() -> httpx.Response:
            with httpx.Client(base_url=base, timeout=60) as http:
                both.wait()
                return http.post(ROUTE, content=body, headers=signed(body))

        def from_api() -> httpx.Response:
            with httpx.Client(base_url=base, timeout=60) as http:
                both.wait()
                return http.post(f"/api/runs/{run_id}/approvals/{approval_id}",
                                 json={"decision": "reject", "reason": "no"})

        with ThreadPoolExecutor(2) as pool:
            slack_answer, api_answer = [f.result() for f in (pool.submit(from_slack), pool.submit(from_api))]
        app.settle()
        [record] = app.approvals(run_id)
        told = responses.accepted()
        if record["status"] == "approved":  # Slack won: the API caller got 409
            assert slack_answer.json()["status"] == "approved"
            assert api_answer.status_code == 409 and api_answer.json()["code"] == "approval_already_decided"
        else:  # the API won: Slack's clicker is told who decided
            assert record["status"] == "rejected" and api_answer.status_code == 202
            assert slack_answer.json() == {"ok": False, "code": "approval_already_decided"}
            [reply] = told
            assert reply.payload["text"] == "Already rejected by anonymous."
            assert reply.payload["response_type"] == "ephemeral"
        assert app.view(run_id)["status"] == "completed"


def test_a_click_after_the_run_was_cancelled_decides_nothing(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    slack: WebhookReceiver, responses: WebhookReceiver,
) -> None:
    model.set_script(Script.of(Reply.call("send_email", EMAIL), "Sent."))
    with app_with(**slack_settings(slack)) as app:
        view = app.start_until_approval()
        run_id = view["run_id"]
        body = click(approval_message(app, slack), "approve", responses)
        assert app.cancel(run_id).status_code == 202
        app.settle()
        assert app.view(run_id)["status"] == "cancelled"
        answer = app.http.post(ROUTE, content=body, headers=signed(body))
        assert answer.json()["ok"] is False
        app.settle()
        assert [a["status"] for a in app.approvals(run_id)] != ["approved"]
        assert app.effects(view["session_id"], "email") == []
        [reply] = responses.accepted()
        assert "finished" in reply.payload["text"] or "expired" in reply.payload["text"]
