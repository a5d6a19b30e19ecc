"""`GET /api/runs/{run_id}/deliveries` (the run's notification log: each event, per subscription, with its attempts)
and `POST /api/runs/{run_id}/deliveries/{event_id}/redeliver` (send it again, with the same `webhook-id`, by a
delivery orchestration of its own: recorded first, then started under a fresh id, so it goes out whatever the run's
own delivery orchestration is doing)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

import azure.durable_functions as df
import azure.functions as func
from pydantic import BaseModel, Field

from agent_runs.services import RunServices
from http_api.adapter import http_endpoint, json_response
from http_api.problems import not_found
from http_api.runs import run_or_404
from notifications import outbox
from notifications.activities import run_subscriptions, start_redelivery


class DeliveryView(BaseModel):
    subscription: str
    event_id: str
    type: str
    timestamp: datetime
    redelivery: bool
    status: Literal["pending", "delivered", "abandoned", "stopped"]
    attempts: list[outbox.Attempt]


class DeliveryLogBody(BaseModel):
    run_id: str
    deliveries: list[DeliveryView]
    given_up: list[outbox.GivenUp] = Field(
        default_factory=list,
        description="recordings of the run's events given up after days of failing (the store unreachable), or for "
        "the run's cancel while they waited to be tried again (`why`): those events were never recorded, so never "
        "sent",
    )


class RedeliveryAccepted(BaseModel):
    event_id: str
    subscriptions: list[str]


@http_endpoint
async def list_deliveries(req: func.HttpRequest) -> func.HttpResponse:
    store = RunServices.current().store
    run = await run_or_404(store, req.route_params["run_id"])
    entries = await outbox.entries(store, run.session_id, run.run_id)
    tries = await outbox.attempts(store, run.session_id, run.run_id)
    views: list[DeliveryView] = []
    for subscription in await run_subscriptions(store, run.session_id, run.run_id):
        done = await outbox.done_entries(store, run.session_id, subscription.key)
        stopped = await outbox.stopped(store, run.session_id, subscription.key, run.run_id)
        for entry in entries:
            if not subscription.wants(entry.event.type):
                continue
            mine = [outbox.Attempt.model_validate(t) for t in tries
                    if t["subscription"] == subscription.key and t["entry"] == entry.entry]
            views.append(DeliveryView(
                subscription=subscription.key, event_id=entry.event.id, type=entry.event.type,
                timestamp=entry.event.timestamp, redelivery=outbox.is_redelivery(entry.entry),
                status=_status(entry.entry in done, mine, stopped), attempts=mine,
            ))
    given_up = await outbox.given_up(store, run.session_id, run.run_id)
    return json_response(DeliveryLogBody(run_id=run.run_id, deliveries=views, given_up=given_up))


def _status(done: bool, attempts: list[outbox.Attempt], stopped: bool) -> Any:
    if done:
        return "abandoned" if attempts and attempts[-1].outcome == "abandoned" else "delivered"
    return "stopped" if stopped else "pending"


@http_endpoint
async def redeliver(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    store = RunServices.current().store
    run = await run_or_404(store, req.route_params["run_id"])
    event_id = req.route_params["event_id"]
    found = next((e for e in await outbox.entries(store, run.session_id, run.run_id) if e.event.id == event_id), None)
    if found is None:
        raise not_found("delivery_not_found", "Delivery", event_id, field="path.event_id")
    nonce = uuid.uuid4().hex[:12]
    entry = await outbox.record_redelivery(store, run.session_id, found.event, nonce)
    keys = [s.key for s in await run_subscriptions(store, run.session_id, run.run_id) if s.wants(found.event.type)]
    for key in keys:
        await start_redelivery(client, key, run_id=run.run_id, session_id=run.session_id, entry=entry, nonce=nonce)
    return json_response(RedeliveryAccepted(event_id=event_id, subscriptions=keys), status=202)
