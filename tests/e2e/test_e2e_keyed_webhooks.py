"""A run's own `webhook` with an `Idempotency-Key` on `POST /api/agents/{agent}/runs`, after what its check finds
changed since the first request (the host no longer resolves, or was taken out of WEBHOOK_ALLOWED_HOSTS): the key's
retry answers with the run the first request started (a replay starts nothing, so checks nothing); a retry that takes
over a run written but never started starts it (the host not looked up again; without the webhook once the settings
no longer allow it); a new start refused its webhook gives the key up. On both stores, over real HTTP."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import pytest
from e2e_harness import InProcessApp
from e2e_settings import watches_the_app_in_process
from never_started import stored_never_started
from webhook_checks import CHANGES
from webhook_receiver import SECRET, WebhookReceiver

from scripted_model import Script, ScriptedModelServer

START = "/api/agents/helper/runs"


@contextmanager
def webhook_app(
    app_with: Callable[..., AbstractContextManager[InProcessApp]],
) -> Iterator[tuple[InProcessApp, WebhookReceiver, dict[str, Any], dict[str, str]]]:
    """An app allowing webhooks to 127.0.0.1, a receiver there, and a keyed start's body naming it."""
    receiver = WebhookReceiver().start()
    try:
        with app_with(WEBHOOK_SECRET=SECRET, WEBHOOK_ALLOWED_HOSTS="127.0.0.1") as app:
            yield app, receiver, {"input": "Say hello", "webhook": receiver.url}, {"Idempotency-Key": uuid.uuid4().hex}
    finally:
        receiver.stop()


def assert_refused(app: InProcessApp, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
    before = app.snapshot()
    refused = app.http.post(START, json=body, headers=headers)
    assert refused.status_code == 400, refused.text
    assert (refused.json()["code"], refused.json()["field"]) == ("webhook_not_allowed", "body.webhook")
    if headers is None:
        assert app.snapshot() == before  # nothing was written (with a key: its claim, given up)


@watches_the_app_in_process  # changes what the app's webhook check finds
@pytest.mark.parametrize("change", CHANGES)
def test_a_key_retry_answers_with_its_run_whatever_its_webhook_check_says_now(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    monkeypatch: pytest.MonkeyPatch, change: str,
) -> None:
    """The run started with its webhook; since, its host no longer resolves (or was revoked): the key's retry is not
    a new start but the same request again, and answers with the run as a poll would - not 400 `webhook_not_allowed`
    (or a failed look-up), which would leave the client unable to get its run back. A new start is refused."""
    model.set_script(Script.of("Hello there."))
    with webhook_app(app_with) as (app, receiver, body, headers):
        first = app.http.post(START, json=body, headers=headers)
        assert first.status_code == 202, first.text
        app.settle()
        CHANGES[change](app.app_module, monkeypatch)
        assert_refused(app, body)

        again = app.http.post(START, json=body, headers=headers)
        assert again.status_code == 200, again.text
        assert (again.json()["run_id"], again.json()["status"]) == (first.json()["run_id"], "completed")
        [done] = receiver.accepted()  # the run's end, sent once
        assert done.verified and done.payload["data"]["run_id"] == first.json()["run_id"]
        assert len(model.log.requests) == 1


@watches_the_app_in_process  # fails the app's orchestration start and its store's close, ages the key's claim
@pytest.mark.parametrize("change", CHANGES)
def test_a_key_retry_starts_the_run_its_first_request_stored_whatever_its_webhook_check_says_now(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    monkeypatch: pytest.MonkeyPatch, change: str,
) -> None:
    """The first request checked the webhook, stored its run, then died before starting it. By the key's retry the
    host no longer resolves: the retry takes the start over and starts the run with the webhook its first request
    checked (each send looks the host up again). Or the host was taken out of WEBHOOK_ALLOWED_HOSTS since, which is
    checked again: the run starts without it (nothing posted to the revoked host). Never a 400 that leaves the run
    written and never started for good (a start is taken over once)."""
    model.set_script(Script.of("Hello there."))
    with webhook_app(app_with) as (app, receiver, body, headers):
        stored_never_started(app.app_module, monkeypatch, lambda: app.http.post(START, json=body, headers=headers))
        CHANGES[change](app.app_module, monkeypatch)
        retried = app.http.post(START, json={**body, "wait_seconds": 30}, headers=headers)
        assert retried.status_code == 200, retried.text
        assert retried.json()["status"] == "completed", retried.json()
        again = app.http.post(START, json=body, headers=headers)
        assert again.json()["run_id"] == retried.json()["run_id"]
        app.settle()
        sent = [(d.verified, d.payload["type"], d.payload["data"]["run_id"]) for d in receiver.accepted()]
        assert sent == ([(True, "run.completed", retried.json()["run_id"])] if change == "unresolvable" else [])


@watches_the_app_in_process  # changes what the app's webhook check finds
def test_a_keyed_start_refused_its_webhook_gives_the_key_up(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The webhook is checked after the key is claimed: refused (its host does not resolve now), the start gives the
    key up, so once the host resolves again the same key starts the run."""
    model.set_script(Script.of("Hello there."))
    with webhook_app(app_with) as (app, receiver, body, headers):
        with pytest.MonkeyPatch.context() as dns_down:
            CHANGES["unresolvable"](app.app_module, dns_down)
            assert_refused(app, body, headers)
        started = app.http.post(START, json={**body, "wait_seconds": 30}, headers=headers)
        assert started.status_code == 200, started.text
        assert started.json()["status"] == "completed", started.json()
        app.settle()
        [done] = receiver.accepted()
        assert done.payload["data"]["run_id"] == started.json()["run_id"]
