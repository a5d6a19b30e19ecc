"""Updates of Slack messages through an interaction's `response_url`, sent after the interaction was answered.

Slack wants the HTTP answer to a button click within three seconds (else the person who clicked sees an error), and a
`response_url` can be slow. So the interaction route decides, records the update in the run's session (as the
notification log does: written before anything is sent, keyed by the request, so it is recorded once) and starts
`slack_response`, an orchestration of its own that POSTs it, a failed attempt retried on a durable timer while Slack
keeps the URL valid (30 minutes). A host killed after the answer loses nothing: the update is in the store and the
orchestration is durable."""

from __future__ import annotations

import logging
from collections.abc import Generator
from typing import Any

import azure.durable_functions as df
from pydantic import BaseModel

from agent_runs.services import RunServices
from durable_steps import activity
from notifications.backoff import next_delay
from notifications.contracts import SlackResponseInput
from notifications.orchestrator import wait
from notifications.sender import SendResult, post_slack_response
from session_store import SessionStore

log = logging.getLogger(__name__)
KIND = "slack_response"
ORCHESTRATOR_NAME = "slack_response"
MAX_ATTEMPTS = 8  # 10 s doubling: the last about 21 minutes after the first, within the URL's 30 minutes


class StoredResponse(BaseModel):
    url: str
    message: dict[str, Any]


async def respond_later(
    client: df.DurableOrchestrationClient, store: SessionStore, session_id: str, request_id: str, url: str,
    message: dict[str, Any],
) -> None:
    """Record the update of one Slack request (once) and start the orchestration that sends it."""
    key = f"slack-response:{request_id}"
    _, created = await store.record_effect(session_id, key, KIND, StoredResponse(url=url, message=message).model_dump())
    if created:
        payload = SlackResponseInput(session_id=session_id, key=key).model_dump()
        await client.start_new(ORCHESTRATOR_NAME, f"slack-response-{request_id}", payload)


@activity()
async def send_slack_response(step: SlackResponseInput) -> SendResult:
    store = RunServices.current().store
    found = await store.get_effect(step.session_id, step.key)
    if found is None:  # the session was deleted meanwhile
        return SendResult(outcome="gone", error="the update is no longer stored")
    stored = StoredResponse.model_validate(found.payload)
    result = await post_slack_response(stored.url, stored.message, attempt=step.attempt)
    if result.outcome != "delivered":
        log.warning("Slack response_url: %s (%s)", result.error, result.outcome)
    return result


def slack_response(context: df.DurableOrchestrationContext) -> Generator[Any, Any, dict[str, Any]]:
    step = SlackResponseInput.model_validate(context.get_input())
    attempt = 0
    while True:  # until delivered, refused for good, or MAX_ATTEMPTS tried
        try:
            result = yield from send_slack_response.run(context, step.model_copy(update={"attempt": attempt}))
        except Exception:  # the step itself failed (the store down, a bug): tried again like a failed POST
            result = SendResult(outcome="retry")
        if result.outcome != "retry" or attempt + 1 == MAX_ATTEMPTS:
            return {"outcome": result.outcome}
        yield wait(context, result.retry_in_seconds or next_delay(attempt))
        attempt += 1
