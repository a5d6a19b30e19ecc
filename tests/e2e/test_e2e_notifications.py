"""Notifications, end to end: signed webhooks (verified by a loopback receiver with the `standardwebhooks` library),
their durable delivery (a receiver down for hours of virtual time, 410, Retry-After), the run's delivery log and
redelivery, and per-run webhooks (only allowed hosts)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import timedelta
from typing import Any

import pytest
from azure.durable_functions import DurableOrchestrationClient, OrchestrationRuntimeStatus
from e2e_harness import PROGRESS_TIMEOUT_S, InProcessApp, pending_ids, until_completed
from e2e_settings import REPO_ROOT, watches_the_app_in_process
from event_outage import events_refused, wait_on_its_backoff
from standardwebhooks import Webhook
from step_pause import failing
from webhook_receiver import SECRET, WebhookReceiver

from devhost.host import use_real_worker
from scripted_model import Match, Reply, Rule, Script, ScriptedModelServer, ScriptedToolCall

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


def delivery_of(app: InProcessApp, run_id: str) -> str:
    """The instance id of the run's one delivery orchestration."""
    [key] = {d["subscription"] for d in deliveries(app, run_id)}
    return f"notify-{key}-{run_id}"


def waiting_for_approval(app: InProcessApp) -> tuple[str, str, str]:
    """A run started and settled at its one approval: (run id, approval id, its delivery orchestration's id)."""
    view = app.start_until_approval()
    run_id, [approval_id] = view["run_id"], pending_ids(view)
    app.settle()
    return run_id, approval_id, delivery_of(app, run_id)


def idle_checks(status: Any) -> list[bool]:
    """The `final` flag of each idle check a delivery orchestration made (from its history)."""
    results = [e.get("Result") for e in status.to_json()["historyEvents"]
               if e["EventType"] == "TaskCompleted" and e.get("FunctionName") == "deliver_next"]
    return [r["final"] for r in results if isinstance(r, dict) and r["outcome"] == "idle"]


@watches_the_app_in_process
def test_the_run_s_end_is_delivered_though_its_delivery_looked_between_the_end_and_its_event(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run is marked ended before its end's event is recorded. A delivery orchestration that looked in between
    found nothing pending and the run ended, so it ended too, and the end's wake-up, sent on a look that still saw it
    running, was dropped (or refused): `run.completed` stayed pending for good. This happened by itself in about one
    run in five; here the interleaving is forced: the look in between, then the status check just before the end."""
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "Sent."))
    with app_with(**webhook_settings(receiver)) as app:
        run_id, approval_id, delivery = waiting_for_approval(app)
        engine = app.host.engine
        outbox = app.app_module("notifications.outbox")
        record_events, get_status = outbox.record_events, DurableOrchestrationClient.get_status
        stale = [False]

        async def after_a_look_in_between(store: Any, session_id: str, events: list[Any], **kwargs: Any) -> int:
            if any(e.final for e in events):  # the run has ended; its end's event is about to be recorded
                looks = len(idle_checks(await engine.get_status(delivery, show_history=True, show_history_output=True)))
                await engine.raise_event(delivery, "notify", "{}")
                for _ in range(int(PROGRESS_TIMEOUT_S / 0.02)):  # bounded: a bug fails the test, not hangs it
                    checks = idle_checks(await engine.get_status(delivery, show_history=True, show_history_output=True))
                    if len(checks) != looks:
                        break
                    await asyncio.sleep(0.02)  # the orchestration runs on this loop: look again
                else:
                    raise AssertionError(f"delivery {delivery} did not look again")
                for _ in range(int(PROGRESS_TIMEOUT_S / 0.02)):
                    if not checks[-1] or (await engine.get_status(delivery)).to_json()["runtimeStatus"] == "Completed":
                        break
                    await asyncio.sleep(0.02)  # it decided to end: let it end, before the status check below
                else:
                    raise AssertionError(f"delivery {delivery} did not complete")
                stale[0] = True
            return await record_events(store, session_id, events, **kwargs)

        async def looked_just_before_it_ended(self: Any, instance_id: str, *args: Any, **kwargs: Any) -> Any:
            status = await get_status(self, instance_id, *args, **kwargs)
            if instance_id == delivery and stale[0] and status.runtime_status != OrchestrationRuntimeStatus.Running:
                stale[0] = False
                status._runtime_status = OrchestrationRuntimeStatus.Running
            return status

        monkeypatch.setattr(outbox, "record_events", after_a_look_in_between)
        monkeypatch.setattr(DurableOrchestrationClient, "get_status", looked_just_before_it_ended)
        assert app.decide(run_id, approval_id, "approve").status_code == 202
        app.settle()
        assert app.view(run_id)["status"] == "completed"
        assert receiver.types() == ["approval.requested", "approval.decided", "run.completed"]
        assert app.history(delivery)["runtimeStatus"] == "Completed"


@watches_the_app_in_process
def test_a_wake_up_refused_because_the_delivery_just_ended_starts_it_again(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The run's next event finds its delivery orchestration running, which has ended by the wake-up (410): it is
    started again at once (it reads the store), rather than the step failing and waiting for its retry."""
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "Sent."))
    with app_with(**webhook_settings(receiver)) as app:
        run_id, approval_id, delivery = waiting_for_approval(app)
        app.host.run(app.host.engine.terminate(delivery, "ended"))
        app.host.wait_for_status(delivery)
        get_status = DurableOrchestrationClient.get_status

        async def looked_just_before_it_ended(self: Any, instance_id: str, *args: Any, **kwargs: Any) -> Any:
            status = await get_status(self, instance_id, *args, **kwargs)
            if instance_id == delivery:
                status._runtime_status = OrchestrationRuntimeStatus.Running
            return status

        monkeypatch.setattr(DurableOrchestrationClient, "get_status", looked_just_before_it_ended)
        assert app.decide(run_id, approval_id, "approve").status_code == 202
        app.settle()
        assert app.view(run_id)["status"] == "completed"
        assert receiver.types() == ["approval.requested", "approval.decided", "run.completed"]


@watches_the_app_in_process
def test_events_go_in_the_run_s_order_whatever_the_clocks_of_the_hosts_recording_them(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each transition's events are recorded by whichever host runs the step, and the store stamps them with that
    host's clock. Here each is an hour further behind than the last, while the receiver is down: once it is up, the
    events still go in the run's order (they were sorted by those stamps: `run.completed` went first)."""
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "Sent."))
    receiver.status = 503
    with app_with(**webhook_settings(receiver)) as app:
        outbox = app.app_module("notifications.outbox")
        record_events = outbox.record_events
        behind = [0]

        async def on_a_host_further_behind(store: Any, *args: Any, **kwargs: Any) -> int:
            behind[0] += 1
            clock = store._clock
            with monkeypatch.context() as skewed:
                skewed.setattr(store, "_clock", lambda: clock() - timedelta(hours=behind[0]))
                return await record_events(store, *args, **kwargs)

        monkeypatch.setattr(outbox, "record_events", on_a_host_further_behind)
        view = app.start_until_approval()
        run_id, [approval_id] = view["run_id"], pending_ids(view)
        assert app.decide(run_id, approval_id, "approve").status_code == 202
        app.settle()
        assert app.view(run_id)["status"] == "completed" and behind[0] == 3
        assert receiver.accepted() == []

        receiver.status = 200
        app.advance(3600)
        assert receiver.types() == ["approval.requested", "approval.decided", "run.completed"]
        assert [d["type"] for d in deliveries(app, run_id)] == receiver.types()


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


@watches_the_app_in_process
def test_a_redelivery_goes_out_though_the_delivery_orchestration_ends_meanwhile(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The run's delivery orchestration is running when a redelivery is asked for, and ends (the run was cancelled
    meanwhile, its end delivered) before it can be woken: the wake-up was refused with a 500, and the recorded entry
    waited for an orchestration that was gone. A redelivery is sent by an orchestration of its own instead."""
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "Sent."))
    with app_with(**webhook_settings(receiver)) as app:
        view = app.start_until_approval()
        run_id = view["run_id"]
        app.settle()
        [requested] = receiver.accepted()
        gateway = app.app_module("http_api.durable_gateway").DurableGateway
        wake = DurableOrchestrationClient.raise_event
        armed = [True]

        async def ended_before_the_wake(self: Any, instance_id: str, name: str, *args: Any, **kwargs: Any) -> None:
            if armed.pop() if armed else False:
                await gateway(self).send_cancel(run_id, "cancelled meanwhile")
                await until_completed(gateway(self), instance_id)  # the run's end delivered: it ended
            await wake(self, instance_id, name, *args, **kwargs)

        monkeypatch.setattr(DurableOrchestrationClient, "raise_event", ended_before_the_wake)
        response = app.http.post(f"/api/runs/{run_id}/deliveries/{requested.headers['webhook-id']}/redeliver")
        assert response.status_code == 202, response.text
        app.settle()
        again = [d for d in receiver.accepted() if d.payload["type"] == "approval.requested"]
        assert len(again) == 2 and {d.headers["webhook-id"] for d in again} == {requested.headers["webhook-id"]}
        assert all(d.verified for d in again)
        assert [d["status"] for d in deliveries(app, run_id) if d["redelivery"]] == ["delivered"]


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


@contextmanager
def waiting_with_slack(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    receiver: WebhookReceiver, slack: WebhookReceiver,
) -> Iterator[tuple[InProcessApp, str, str, dict[str, str]]]:
    """A run waiting for its approval, with two subscriptions that do not want its end: Slack's (approval requests
    only) and a webhook's (`WEBHOOK_EVENTS=approval.*`). Yields the app, the run, the approval, and each delivery
    orchestration's status (both running, waiting while the run waits)."""
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "Sent."))
    with app_with(**webhook_settings(receiver, WEBHOOK_EVENTS="approval.*", SLACK_WEBHOOK_URL=slack.url)) as app:
        view = app.start_until_approval()
        [approval_id] = pending_ids(view)
        app.settle()
        statuses = delivery_statuses(app, view["run_id"])
        assert len(statuses) == 2 and set(statuses.values()) == {"Running"}
        yield app, view["run_id"], approval_id, statuses


def approved_deliveries_end(
    app: InProcessApp, run_id: str, approval_id: str, receiver: WebhookReceiver, slack: WebhookReceiver,
) -> None:
    """Approve: the run ends, its decision is delivered to the webhook, and every delivery orchestration ends."""
    statuses = delivery_statuses(app, run_id)
    assert app.decide(run_id, approval_id, "approve").status_code == 202
    app.settle()
    assert app.view(run_id)["status"] == "completed"
    assert receiver.types() == ["approval.requested", "approval.decided"] and len(slack.accepted()) == 1
    assert delivery_statuses(app, run_id) == {key: "Completed" for key in statuses}


def test_deliveries_end_with_the_run_for_subscriptions_that_skip_its_final_event(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    receiver: WebhookReceiver, slack: WebhookReceiver,
) -> None:
    """Slack is sent approval requests only, and `WEBHOOK_EVENTS` may leave out the run's end: their delivery
    orchestrations still end with the run, rather than wait for a wake-up forever (one more per run)."""
    with waiting_with_slack(app_with, model, receiver, slack) as (app, run_id, approval_id, _):
        approved_deliveries_end(app, run_id, approval_id, receiver, slack)


@watches_the_app_in_process
def test_the_run_end_wakes_every_delivery_though_one_ends_before_its_wake_up(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    receiver: WebhookReceiver, slack: WebhookReceiver, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The run's end wakes each delivery orchestration that runs. The webhook's was still sending the decision when
    the run ended, so it found the run ended and ended itself, between the look that saw it running and its wake-up:
    that wake-up's 410 failed the whole step, and Slack's delivery, after it, was woken only by the step's retry (on
    Azure seconds later; under load the test's run ended with Slack's still running)."""
    with waiting_with_slack(app_with, model, receiver, slack) as (app, run_id, approval_id, statuses):
        [webhook] = [f"notify-{key}-{run_id}" for key in statuses if key != "slack"]
        gateway = app.app_module("http_api.durable_gateway").DurableGateway
        wake = DurableOrchestrationClient.raise_event
        wakes: list[str] = []

        async def ended_before_the_wake(self: Any, instance_id: str, name: str, *args: Any, **kwargs: Any) -> None:
            wakes.append(instance_id)
            if instance_id == webhook and wakes.count(webhook) == 2:  # the run's end's, once it was seen running
                receiver.release()  # the decision is delivered, and the delivery finds the run ended
                await until_completed(gateway(self), instance_id)
            await wake(self, instance_id, name, *args, **kwargs)

        monkeypatch.setattr(DurableOrchestrationClient, "raise_event", ended_before_the_wake)
        receiver.hold()  # the webhook's delivery is still sending the decision when the run ends
        approved_deliveries_end(app, run_id, approval_id, receiver, slack)
        assert wakes.count(webhook) == 2
        assert app.history(run_id)["runtimeStatus"] == "Completed"  # its end's step did not fail


@watches_the_app_in_process
def test_a_delivery_step_that_keeps_failing_is_given_up_after_days_and_can_be_redelivered(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Not the receiver: the delivery step itself raises (a bug; the store down). It is retried on the capped backoff
    for three days (before, it was retried forever, and after about a thousand failures the backoff overflowed), then
    the event is given up: in the log as `abandoned`, with why, and redeliverable."""
    model.set_script(Script.of("Hello."))
    with app_with(**webhook_settings(receiver)) as app:
        async def broken(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("a bug in the delivery step")

        monkeypatch.setattr(app.app_module("notifications.activities"), "send", broken)
        started = app.host.clock.now()
        run_id = app.start()["run_id"]
        app.settle()
        delivery = delivery_of(app, run_id)
        while app.host.clock.now() - started < timedelta(days=3) - timedelta(hours=1):
            app.advance(3600)
        [entry] = deliveries(app, run_id)
        assert entry["status"] == "pending" and app.history(delivery)["runtimeStatus"] == "Running"

        for _ in range(8):  # the failure that comes once it has been failing for three days gives the event up
            app.advance(3600)
        [entry] = deliveries(app, run_id)
        assert entry["status"] == "abandoned", entry
        assert "redeliver" in entry["attempts"][-1]["error"]
        assert app.history(delivery)["runtimeStatus"] == "Completed"
        assert receiver.deliveries == []

        monkeypatch.undo()  # fixed: a redelivery sends it
        response = app.http.post(f"/api/runs/{run_id}/deliveries/{entry['event_id']}/redeliver")
        assert response.status_code == 202, response.text
        app.settle()
        [done] = receiver.accepted()
        assert done.verified and done.headers["webhook-id"] == entry["event_id"]


def once_each_in_order(receiver: WebhookReceiver) -> list[str]:
    """The types the receiver got, after checking each was signed and each webhook-id came once."""
    got = receiver.accepted()
    assert all(d.verified for d in got)
    assert len({d.headers["webhook-id"] for d in got}) == len(got), [d.payload["type"] for d in got]
    return [d.payload["type"] for d in got]


def test_a_run_s_end_whose_recording_fails_for_good_is_recorded_and_delivered_once_the_store_is_back(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    receiver: WebhookReceiver,
) -> None:
    """Recording the run's end failed after the activity's retries: the failure was ignored, and `run.completed` was
    never recorded, so never sent (nothing is recorded after a run's end to catch it up). It is recorded again on a
    durable timer until the store takes it, then delivered, once."""
    model.set_script(Script.of("Hello."))
    with app_with(**webhook_settings(receiver)) as app:
        with events_refused(app.host):
            run_id = app.start()["run_id"]
            for _ in range(6):  # an hour of the store refusing: every retry of the recording fails
                app.advance(600)
            assert app.view(run_id)["status"] == "completed"  # the run's end is not held up by its notification
            assert receiver.deliveries == []

        app.advance(3600)  # the recording's backoff is capped at an hour
        assert once_each_in_order(receiver) == ["run.completed"]
        assert receiver.accepted()[0].payload["data"]["run_id"] == run_id
        assert [(d["type"], d["status"]) for d in deliveries(app, run_id)] == [("run.completed", "delivered")]
        assert app.history(delivery_of(app, run_id))["runtimeStatus"] == "Completed"
        assert app.history(run_id)["runtimeStatus"] == "Completed"
        app.advance(3600)
        assert len(receiver.deliveries) == 1


def test_events_whose_recording_fails_for_good_mid_run_come_in_order_before_its_end(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    receiver: WebhookReceiver,
) -> None:
    """The store refused the events of the decision and of the run's end (every retry of both recordings failed):
    `approval.decided` was lost and the run's delivery orchestration waited for its end's event for good. Each
    recording is tried again until it holds, before the run goes on: the receiver gets every event, in the run's
    order, once."""
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "Sent."))
    with app_with(**webhook_settings(receiver)) as app:
        run_id, approval_id, delivery = waiting_for_approval(app)
        assert receiver.types() == ["approval.requested"]
        with events_refused(app.host):
            assert app.decide(run_id, approval_id, "approve").status_code == 202
            for _ in range(6):
                app.advance(600)
            assert receiver.types() == ["approval.requested"]

        for _ in range(2):
            app.advance(3600)
        assert app.view(run_id)["status"] == "completed"
        assert once_each_in_order(receiver) == ["approval.requested", "approval.decided", "run.completed"]
        assert [d["type"] for d in deliveries(app, run_id)] == receiver.types()
        assert app.history(delivery)["runtimeStatus"] == "Completed"


def refused_for_an_hour(app: InProcessApp) -> None:
    """Every retry of the recording activity fails: the run then waits on its durable timer to record again."""
    for _ in range(6):
        app.advance(600)


def test_a_run_waiting_to_record_its_approval_s_events_is_cancelled_promptly(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    receiver: WebhookReceiver,
) -> None:
    """The store refused the approval's events: the run waited on the recording's timer, and until the store took
    them it did not act on a cancel (it stayed `in_progress` for as long as the store was down). The wait races the
    cancel now: the run ends `cancelled` at once; its end is recorded and delivered once the store is back, the
    given-up approval's events never (the cancel closed the approval)."""
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "Sent."))
    with app_with(**webhook_settings(receiver)) as app:
        with events_refused(app.host):
            run_id = app.start(input="Email Bob")["run_id"]
            refused_for_an_hour(app)
            assert app.view(run_id)["status"] != "cancelled"
            assert app.cancel(run_id).status_code == 202
            app.settle()  # no timer fires
            assert app.view(run_id)["status"] == "cancelled"
            assert receiver.deliveries == []

        for _ in range(2):
            app.advance(3600)  # the run's end: recorded on its own timer, once the store takes it
        assert once_each_in_order(receiver) == ["run.cancelled"]
        assert [(d["type"], d["status"]) for d in deliveries(app, run_id)] == [("run.cancelled", "delivered")]
        assert app.history(run_id)["runtimeStatus"] == "Completed"


def test_a_cancel_that_wins_a_recording_s_wait_cancels_its_timer(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    receiver: WebhookReceiver,
) -> None:
    """After hours of refusals the recording waits on a long timer (its backoff grew towards an hour); a cancel wins
    that wait. The timer is cancelled: the run's orchestration ends as soon as its end is recorded, not when that
    timer would have fired (an uncancelled timer keeps an instance running). The approval's events, given up for the
    cancel, are noted in the run's delivery log (`why: cancelled`; before, a warning only)."""
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "Sent."))
    with app_with(**webhook_settings(receiver)) as app:
        with events_refused(app.host):
            run_id = app.start(input="Email Bob")["run_id"]
            wait_on_its_backoff(app.host, run_id)
            assert app.cancel(run_id).status_code == 202
            app.settle()  # no timer fires
            assert app.view(run_id)["status"] == "cancelled"
        app.advance(600)  # the run's end is recorded on its own short timer
        assert once_each_in_order(receiver) == ["run.cancelled"]
        assert app.history(run_id)["runtimeStatus"] == "Completed"
        log = app.http.get(f"/api/runs/{run_id}/deliveries").json()
        assert [(g["what"], g["why"]) for g in log["given_up"]] == [("approvals", "cancelled")], log
        assert app.history(delivery_of(app, run_id))["runtimeStatus"] == "Completed"  # ended with the run, as ever


def test_a_cancel_while_a_run_waits_to_record_its_approval_s_expiry_ends_it_cancelled(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    receiver: WebhookReceiver,
) -> None:
    """The approval's deadline passed (the agent fails its run then) and the store refused the expiry's events; a
    cancel wins the recording's wait, which gives those events up for it. The run must then end `cancelled`, as the
    cancel asked: not `failed` by the deadline, after giving its events up for a cancel it did not take."""
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "Sent."))
    with app_with(**webhook_settings(receiver)) as app:
        run_id = app.start_until_approval(agent="strict", input="Email Bob")["run_id"]
        app.settle()
        assert once_each_in_order(receiver) == ["approval.requested"]
        with events_refused(app.host):
            wait_on_its_backoff(app.host, run_id)  # past the deadline: the expiry's recording waits on a long timer
            assert app.cancel(run_id).status_code == 202
            app.settle()  # no timer fires
            assert app.view(run_id)["status"] == "cancelled"
        app.advance(600)
        assert once_each_in_order(receiver) == ["approval.requested", "run.cancelled"]
        assert app.history(run_id)["runtimeStatus"] == "Completed"


def test_a_cancel_that_arrives_while_the_recording_is_still_tried_ends_the_run_at_its_first_wait(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    receiver: WebhookReceiver,
) -> None:
    """The cancel (sent twice) arrives while the approval's recording is still in its activity's retries, before
    the recording waits on its timer: it lands on a waiter of an earlier race, not on that wait's. The run takes it
    there (it does not wait on a timer that only a cancel it already received could end) and ends `cancelled` once,
    while the store still refuses its events; its end is delivered once, once the store is back."""
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "Sent."))
    with app_with(**webhook_settings(receiver)) as app:
        with events_refused(app.host):
            run_id = app.start(input="Email Bob")["run_id"]
            app.settle()  # the recording's activity failed once: its retry waits
            assert app.cancel(run_id).status_code == 202
            assert app.cancel(run_id).status_code == 202
            refused_for_an_hour(app)
            assert app.view(run_id)["status"] == "cancelled"
            assert app.cancel(run_id).status_code == 409
            noted = app.http.get(f"/api/runs/{run_id}/deliveries").json()["given_up"]
            assert [(g["what"], g["why"]) for g in noted] == [("approvals", "cancelled")]  # the note goes through

        for _ in range(2):
            app.advance(3600)
        assert once_each_in_order(receiver) == ["run.cancelled"]
        assert [(d["type"], d["status"]) for d in deliveries(app, run_id)] == [("run.cancelled", "delivered")]
        assert app.history(run_id)["runtimeStatus"] == "Completed"


@pytest.mark.parametrize("refused", [{"kind": "notify_event"}, None], ids=["events", "every_effect"])
def test_a_recording_given_up_after_days_is_noted_in_the_run_s_log_if_the_store_takes_the_note(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    receiver: WebhookReceiver, refused: dict[str, str] | None,
) -> None:
    """Through whichever worker runs the app (Azure's too: the note is an activity of its own): the run's end event
    is refused for three days and given up; its orchestration ends. The note of it is in the run's delivery log if
    the store takes it; when the store refuses that write too (`every_effect`), the orchestration still ends (the
    note is best effort: the warning says it) rather than failing."""
    model.set_script(Script.of("Hello."))
    with app_with(**webhook_settings(receiver)) as app:
        started = app.host.clock.now()
        with failing(app.host, "record_effect", equal=refused):
            run_id = app.start()["run_id"]
            while app.host.clock.now() - started < timedelta(days=3) + timedelta(hours=8):
                app.advance(3600)
            assert app.history(run_id)["runtimeStatus"] == "Completed"
        assert app.view(run_id)["status"] == "completed"
        given_up = app.http.get(f"/api/runs/{run_id}/deliveries").json()["given_up"]
        assert [g["what"] for g in given_up] == (["finished"] if refused else [])
        assert receiver.deliveries == []


@watches_the_app_in_process
def test_a_recording_that_fails_for_days_is_given_up_visibly_and_the_run_ends(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    receiver: WebhookReceiver, caplog: pytest.LogCaptureFixture,
) -> None:
    """The store refused the run's end event for good: its recording was tried again on a durable timer forever, and
    the run's orchestration never ended. It is given up after the deliveries' own three days (as a delivery step
    that keeps failing is): the orchestration ends, with a warning naming the run and a stable code, and the run's
    delivery log says which recording was given up."""
    model.set_script(Script.of("Hello."))
    with app_with(**webhook_settings(receiver)) as app:
        started = app.host.clock.now()
        with events_refused(app.host):
            run_id = app.start()["run_id"]
            while app.host.clock.now() - started < timedelta(days=3) - timedelta(hours=1):
                app.advance(3600)
            assert app.history(run_id)["runtimeStatus"] == "Running"  # still trying to record its end
            assert not [r for r in caplog.records if "notification_recording_given_up" in r.getMessage()]
            for _ in range(8):
                app.advance(3600)
            assert app.history(run_id)["runtimeStatus"] == "Completed"
        assert app.view(run_id)["status"] == "completed"
        [warned] = [r.getMessage() for r in caplog.records if "notification_recording_given_up" in r.getMessage()]
        assert run_id in warned and "finished" in warned
        log = app.http.get(f"/api/runs/{run_id}/deliveries").json()
        assert log["deliveries"] == [] and [g["what"] for g in log["given_up"]] == ["finished"], log
        app.advance(3600)
        assert receiver.deliveries == []


def test_the_run_s_delivery_ends_when_its_end_s_recording_is_given_up(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    receiver: WebhookReceiver,
) -> None:
    """A run's delivery orchestration sleeps once it has sent what was recorded, until the run's end's event is
    recorded (its recording wakes it). When that recording is given up after days, nothing records the end: the
    delivery must end with the run (it does not sleep for good on a wake-up that never comes)."""
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "Sent."))
    with app_with(**webhook_settings(receiver)) as app:
        run_id, approval_id, delivery = waiting_for_approval(app)
        assert once_each_in_order(receiver) == ["approval.requested"]
        with events_refused(app.host):
            assert app.decide(run_id, approval_id, "approve").status_code == 202
            started = app.host.clock.now()
            while app.host.clock.now() - started < timedelta(days=6, hours=8):
                app.advance(3600)
            assert app.history(run_id)["runtimeStatus"] == "Completed"
        assert app.view(run_id)["status"] == "completed"
        given_up = app.http.get(f"/api/runs/{run_id}/deliveries").json()["given_up"]
        assert [g["what"] for g in given_up] == ["approvals", "finished"]
        app.settle()
        assert app.history(delivery)["runtimeStatus"] == "Completed"
        assert once_each_in_order(receiver) == ["approval.requested"]


def test_the_run_s_delivery_ends_when_its_end_s_recording_is_given_up_and_the_note_of_it_refused_too(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    receiver: WebhookReceiver, caplog: pytest.LogCaptureFixture,
) -> None:
    """As above, but the store refuses the notes of the given-up recordings too: nothing wakes the run's idle
    delivery, and it slept for good. It looks again every few days while the run runs, hourly once the run has ended
    without its end's event, and ends (with a warning, seen where the app runs in this process) once the run's
    orchestration, the only one that could record that event, has ended. Through whichever worker runs the app: the
    look at the run's orchestration is an activity of its own, with the Durable client."""
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "Sent."))
    with app_with(**webhook_settings(receiver)) as app:
        run_id, approval_id, delivery = waiting_for_approval(app)
        assert once_each_in_order(receiver) == ["approval.requested"]
        with failing(app.host, "record_effect", among={"kind": ["notify_event", "notify_given_up"]}):
            assert app.decide(run_id, approval_id, "approve").status_code == 202
            started = app.host.clock.now()
            while app.host.clock.now() - started < timedelta(days=5):  # both recordings fail for days: in hours
                app.advance(3600)
            while app.history(run_id)["runtimeStatus"] != "Completed":
                assert app.host.clock.now() - started < timedelta(days=7), "the run never ended"
                app.advance(600)
            assert app.history(delivery)["runtimeStatus"] == "Running"  # asleep, to look again
            for _ in range(2):
                app.advance(3600)
            ended = app.history(delivery)
            assert (ended["runtimeStatus"], ended["output"]) == ("Completed", {"outcome": "end_never_recorded"})
        assert app.view(run_id)["status"] == "completed"
        assert app.http.get(f"/api/runs/{run_id}/deliveries").json()["given_up"] == []
        if not use_real_worker(REPO_ROOT, None):
            [warned] = [r.getMessage() for r in caplog.records if "notification_end_never_recorded" in r.getMessage()]
            assert run_id in warned
        assert once_each_in_order(receiver) == ["approval.requested"]


def test_several_runs_waiting_to_record_each_record_every_event_once_in_order(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    receiver: WebhookReceiver,
) -> None:
    """Three runs wait on their recordings' timers at once (the store refuses their approvals' events), and each is
    decided meanwhile: once the store is back, each run records its events once, in its own order (the request
    before its decision before its end), and ends."""
    model.set_script(Script(rules=[Rule(match=Match(after_tool_results=True), reply=Reply.say("Sent."))],
                            default=Reply.call("send_email", EMAIL_BOB)))
    with app_with(**webhook_settings(receiver)) as app:
        with events_refused(app.host):
            run_ids = [app.start(input=f"Email Bob, {n}")["run_id"] for n in range(3)]
            refused_for_an_hour(app)
            for run_id in run_ids:
                [approval] = app.approvals(run_id)
                assert app.decide(run_id, approval["approval_id"], "approve").status_code == 202
            refused_for_an_hour(app)
            assert receiver.deliveries == [] and all(app.history(r)["runtimeStatus"] == "Running" for r in run_ids)

        for _ in range(2):
            app.advance(3600)  # the recordings' backoff is capped at an hour
        once_each_in_order(receiver)
        for run_id in run_ids:
            assert app.view(run_id)["status"] == "completed"
            got = [d.payload["type"] for d in receiver.accepted() if d.payload["data"]["run_id"] == run_id]
            assert got == ["approval.requested", "approval.decided", "run.completed"], (run_id, got)
            assert [(d["type"], d["status"]) for d in deliveries(app, run_id)] == [
                (kind, "delivered") for kind in got]
            assert app.history(run_id)["runtimeStatus"] == "Completed"
            assert app.history(delivery_of(app, run_id))["runtimeStatus"] == "Completed"
        app.advance(3600)
        assert len(receiver.deliveries) == 9


@watches_the_app_in_process
def test_a_cancel_that_wins_the_recording_s_wait_between_two_calls_applying_decisions_is_taken(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two approvals decided at once, applied one call each (the payload budget); the store refuses the first
    decision's events and a cancel wins the recording's wait. The run must take that cancel before it goes on: it
    called `apply_decisions` once more first, and when that call failed (the store failing it too) the run ended
    `failed`, its cancel ignored."""
    from activities import approvals
    from agent_runs.budget import payload_size
    from agent_runs.contracts import DecisionsResult

    monkeypatch.setattr(approvals, "DECISIONS_RESULT_BUDGET", payload_size(DecisionsResult()))  # one decision a call
    emails = [ScriptedToolCall(name="send_email", arguments={**EMAIL_BOB, "subject": s}) for s in ("Hi", "Again")]
    model.set_script(Script.of(Reply(tool_calls=emails), "Sent."))
    with app_with(**webhook_settings(receiver)) as app:
        view = app.start_until_approval(input="Email Bob twice")
        run_id, pending = view["run_id"], pending_ids(view)
        assert len(pending) == 2
        app.settle()
        with failing(app.host, "list_approvals", absent=("status",)):  # `apply_decisions`' read (a close reads
            # only the pending ones): both decisions are stored before the run reads either
            for approval_id in pending:
                assert app.decide(run_id, approval_id, "approve").status_code == 202
            app.settle()
        with events_refused(app.host):
            wait_on_its_backoff(app.host, run_id)  # the first decision applied; its events' recording waits
            with failing(app.host, "list_approvals", absent=("status",)):
                assert app.cancel(run_id).status_code == 202
                for _ in range(3):
                    app.advance(600)
        for _ in range(2):
            app.advance(3600)
        assert app.view(run_id)["status"] == "cancelled"
        assert app.history(run_id)["runtimeStatus"] == "Completed"
