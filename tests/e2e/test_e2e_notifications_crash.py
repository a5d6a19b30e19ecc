"""A host killed (SIGKILL) after an approval was recorded and before its notification reached the receiver: after the
restart the event is delivered (it was in the store's outbox before any attempt), then the rest of the run's, in
order, each verified by the receiver with `standardwebhooks`. And one killed while a run waits to record its end's
event again (the store refused it): after the restart it is recorded and delivered, once; one killed while a run
waits to record its approval's events again, cancelled after the restart."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from e2e_harness import FINAL, PROGRESS_TIMEOUT_S, AppClient
from e2e_settings import E2E_DIR, REPO_ROOT, app_settings
from event_outage import events_refused, wait_on_its_backoff
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


def notifying_host(tmp_path: Path, model: ScriptedModelServer, receiver: WebhookReceiver) -> SubprocessHost:
    """The app in a child devhost on file state (a virtual clock), sending its events to the receiver."""
    env = app_settings(model.base_url, SESSION_STORE_PATH=str(tmp_path / "sessions.sqlite3"), PYTHONPATH=str(E2E_DIR),
                       E2E_MARKER_DIR=str(tmp_path), WEBHOOK_URLS=receiver.url, WEBHOOK_SECRET=SECRET)
    return SubprocessHost(REPO_ROOT, state_path=tmp_path / "devhost.sqlite3", env=env, clock="virtual")


def end_delivered_once(host: SubprocessHost, receiver: WebhookReceiver, run_id: str, end: str) -> None:
    """After a restart, with the store taking the run's events again: its end (`end`) is recorded and delivered,
    once, and its orchestration ends."""
    for _ in range(3):  # the restarted virtual clock starts at the real time again: past the retry's timer
        host.advance(3600)
    eventually(lambda: receiver.types() == [end], f"{end} not delivered: {receiver.types()}")
    host.wait_until_idle()
    host.advance(3600)
    [done] = receiver.deliveries
    assert done.verified and done.payload["data"]["run_id"] == run_id
    assert host.wait_for_status(run_id)["runtimeStatus"] == "Completed"


def test_killed_between_an_approval_and_its_delivery(
    tmp_path: Path, model: ScriptedModelServer, receiver: WebhookReceiver
) -> None:
    model.set_script(Script.of(Reply.call("send_email", EMAIL), "Sent."))
    receiver.status = 503  # the first attempt fails: the event is pending when the host dies
    host = notifying_host(tmp_path, model, receiver)
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


def test_killed_while_the_run_s_end_waits_to_be_recorded_again(
    tmp_path: Path, model: ScriptedModelServer, receiver: WebhookReceiver
) -> None:
    """The store refused the run's end event through every retry of its recording (the run itself ended), and the
    host died while the run waited on its durable timer to record it again: after the restart, once the store takes
    it, `run.completed` is recorded and delivered, once. (Before, the refused event was given up: never sent.)"""
    model.set_script(Script.of("Hello."))
    host = notifying_host(tmp_path, model, receiver)
    host.start()
    try:
        api = AppClient(host.client)
        with events_refused(host):
            run_id = api.start(input="Hi")["run_id"]
            assert api.wait_for(run_id, FINAL)["status"] == "completed"
            for _ in range(6):  # an hour of refusals
                host.advance(600)
            assert receiver.deliveries == []
            host.kill()
        host.start()
        end_delivered_once(host, receiver, run_id, "run.completed")
    finally:
        host.close()


def test_killed_while_a_run_waits_to_record_its_approval_s_events_then_cancelled(
    tmp_path: Path, model: ScriptedModelServer, receiver: WebhookReceiver
) -> None:
    """The store refused the approval's events for hours, and the host died while the run waited on its recording's
    long timer. After the restart the run replays that wait, raced with cancel again: a cancel ends it `cancelled`
    at once (the store still refusing, no timer fired), and once the store is back its end is recorded and
    delivered, once; the approval's events never (the cancel closed it)."""
    model.set_script(Script.of(Reply.call("send_email", EMAIL), "Sent."))
    with closing(notifying_host(tmp_path, model, receiver)) as host:
        api = AppClient(host.start().client)
        with events_refused(host):
            run_id = api.start(input="Email Bob")["run_id"]
            wait_on_its_backoff(host, run_id)
            host.kill()
            host.start()
            assert api.cancel(run_id).status_code == 202
            host.wait_until_idle()  # no timer fires
            assert api.view(run_id)["status"] == "cancelled"
            assert receiver.deliveries == []
        end_delivered_once(host, receiver, run_id, "run.cancelled")
