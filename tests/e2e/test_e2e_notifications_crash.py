"""A host killed (SIGKILL) after an approval was recorded and before its notification reached the receiver: after the
restart the event is delivered (it was in the store's outbox before any attempt), then the rest of the run's, in
order, each verified by the receiver with `standardwebhooks`."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_harness import FINAL, PROGRESS_TIMEOUT_S, AppClient
from e2e_settings import E2E_DIR, REPO_ROOT, app_settings
from webhook_receiver import SECRET, WebhookReceiver

from devhost.testing import SubprocessHost
from scripted_model import Reply, Script, ScriptedModelServer

EMAIL = {"to": "bob@example.com", "subject": "Hi", "body": "Hello Bob"}
pytestmark = pytest.mark.slow


def eventually(predicate, what: str) -> None:  # type: ignore[no-untyped-def]
    """Poll another process's effect (there is no event to wait on), bounded."""
    deadline = time.monotonic() + PROGRESS_TIMEOUT_S
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.05)


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    started = WebhookReceiver().start()
    yield started
    started.stop()


def test_killed_between_an_approval_and_its_delivery(
    tmp_path: Path, model: ScriptedModelServer, receiver: WebhookReceiver
) -> None:
    model.set_script(Script.of(Reply.call("send_email", EMAIL), "Sent."))
    receiver.status = 503  # the first attempt fails: the event is pending when the host dies
    env = app_settings(model.base_url, SESSION_STORE_PATH=str(tmp_path / "sessions.sqlite3"), PYTHONPATH=str(E2E_DIR),
                       E2E_MARKER_DIR=str(tmp_path), WEBHOOK_URLS=receiver.url, WEBHOOK_SECRET=SECRET)
    host = SubprocessHost(REPO_ROOT, state_path=tmp_path / "devhost.sqlite3", env=env, clock="virtual")
    host.start()
    try:
        api = AppClient(host.client)
        run_id = api.start(input="Email Bob")["run_id"]
        [approval_id] = [a["approval_id"] for a in api.wait_for(run_id, {"requires_action"})["pending_approvals"]]
        eventually(lambda: len(receiver.deliveries) >= 1, "no delivery attempt")
        assert receiver.accepted() == []

        host.kill()
        receiver.status = 200
        host.start()
        host.advance(3600)  # the retry's durable timer fires after the restart

        eventually(lambda: receiver.types() == ["approval.requested"], "approval.requested not delivered")
        assert api.decide(run_id, approval_id, "approve").status_code == 202
        assert api.wait_for(run_id, FINAL)["status"] == "completed"
        host.wait_until_idle()
        eventually(lambda: receiver.types() == ["approval.requested", "approval.decided", "run.completed"],
                   f"not everything delivered: {receiver.types()}")
        assert all(d.verified for d in receiver.accepted())
        assert receiver.accepted()[0].headers["webhook-id"] == receiver.deliveries[0].headers["webhook-id"]
    finally:
        host.close()
