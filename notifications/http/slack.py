"""`POST /api/integrations/slack/interactions`: Slack's Approve / Reject buttons.

The request is Slack's only if its `v0` signature over `v0:{timestamp}:{body}` matches `SLACK_SIGNING_SECRET` within
five minutes (the maintained `slack_sdk` verifier, constant-time), and each signature is accepted once (a replay
inside the window is refused too). The Slack user becomes an approver only through `SLACK_APPROVERS`; the decision
then takes the API's path (`http_api.approvals.record_decision`: roles, separation of duties, exactly one winner),
the channel is recorded for the audit, and Slack is answered at once; the message is updated through the
interaction's `response_url` afterwards, durably (`notifications.slack_responses`)."""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any
from urllib.parse import parse_qs, urlsplit

import azure.durable_functions as df
import azure.functions as func
from pydantic import BaseModel, ValidationError

from agent_runs.services import RunServices
from agent_runtime.settings_snapshot import current_settings
from http_api.access import decidable_approval
from http_api.adapter import http_endpoint, json_response
from http_api.approvals import record_decision
from http_api.caller import acting_as, public
from http_api.durable_gateway import DurableGateway
from http_api.identity import channel_principal
from http_api.models import ApprovalDecisionRequest
from http_api.problems import ApiProblem
from notifications.payloads import slack_outcome
from notifications.settings import NotificationSettings
from notifications.slack_responses import respond_later

log = logging.getLogger(__name__)
MAX_BODY_BYTES = 64 * 1024


class SlackUser(BaseModel):
    id: str
    username: str | None = None


class SlackAction(BaseModel):
    action_id: str
    value: str | None = None
    block_id: str | None = None


class SlackInteraction(BaseModel):
    type: str
    user: SlackUser
    actions: list[SlackAction] = []
    response_url: str | None = None
    message: dict[str, Any] | None = None


def _refused(detail: str) -> ApiProblem:
    return ApiProblem(401, "slack_signature_invalid", "Not a request from Slack", detail,
                      field="header.x-slack-signature")


def verified_interaction(req: func.HttpRequest, signing_secret: str) -> tuple[SlackInteraction, str]:
    body = req.get_body() or b""
    if len(body) > MAX_BODY_BYTES:
        raise ApiProblem(413, "payload_too_large", "The request body is too large", f"At most {MAX_BODY_BYTES} bytes.")
    headers = {k.lower(): v for k, v in req.headers.items()}
    # Loaded by the first Slack request: `slack_sdk`'s package imports its web clients (~0.1 s of every cold start).
    from slack_sdk.signature import SignatureVerifier

    try:
        valid = SignatureVerifier(signing_secret).is_valid_request(body, headers)
    except ValueError:  # a timestamp that is not a number
        valid = False
    if not valid:
        raise _refused("The signature does not match, or its timestamp is more than five minutes off.")
    try:
        payload = parse_qs(body.decode("utf-8"), strict_parsing=True)["payload"][0]
        return SlackInteraction.model_validate(json.loads(payload)), headers["x-slack-signature"]
    except (KeyError, ValueError, UnicodeDecodeError, ValidationError) as error:
        raise ApiProblem(400, "slack_payload_invalid", "Not a Slack interaction", "form field payload",
                         field="body.payload") from error


@http_endpoint
@public
async def slack_interactions(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    settings = current_settings(NotificationSettings)
    if settings.slack_signing_secret is None:
        raise _refused("SLACK_SIGNING_SECRET is not set: Slack interactions are off.")
    interaction, signature = verified_interaction(req, settings.slack_signing_secret.get_secret_value())
    action = next((a for a in interaction.actions if a.action_id in ("approve", "reject")), None)
    if interaction.type != "block_actions" or action is None or not action.value or not action.block_id:
        return json_response({"ok": True, "ignored": True})  # e.g. the "Open" link button
    run_id = action.block_id.removeprefix("approval:")
    services = RunServices.current()
    reply = _Reply(client, services, interaction, request_id(signature))
    mapped = settings.slack_user_map().get(interaction.user.id)
    if mapped is None:
        await reply.later(await _session_of(services, run_id), _ephemeral(
            "Your Slack account is not mapped to an approver of this app."))
        return json_response({"ok": False, "reason": "slack_user_not_mapped"})
    principal = channel_principal(mapped[0], mapped[1])
    with acting_as(principal):
        try:
            run, record = await decidable_approval(services.store, run_id, action.value)
            await _accept_once(services, run.session_id, signature)
            decision = ApprovalDecisionRequest(
                decision=action.action_id,  # type: ignore[arg-type]
                reason=f"Rejected in Slack by {principal.name}" if action.action_id == "reject" else None,
            )
            decided = await record_decision(services, DurableGateway(client), run, record, decision)
        except ApiProblem as problem:
            if problem.code != "slack_request_replayed":  # the first request's reply is on its way
                await reply.later(await _session_of(services, run_id),
                                  _ephemeral(await _why(services, action.value, problem)))
            return json_response({"ok": False, "code": problem.code})
    await services.store.record_effect(run.session_id, f"decision-source:{decided.approval_id}", "decision_source",
                                       {"source": "slack", "slack_user_id": interaction.user.id,
                                        "decided_by": principal.id, "decision": decided.status})
    outcome = f"{'Approved' if decided.status == 'approved' else 'Rejected'} by {principal.name} (in Slack)."
    await reply.later(run.session_id, slack_outcome(interaction.message, outcome))
    return json_response({"ok": True, "status": decided.status})


def request_id(signature: str) -> str:
    """One Slack request (its signature is unique to its timestamp and body): for the replay check and its reply."""
    return hashlib.sha256(signature.encode()).hexdigest()[:32]


async def _accept_once(services: RunServices, session_id: str, signature: str) -> None:
    _, created = await services.store.record_effect(session_id, f"slack-request:{request_id(signature)}",
                                                    "slack_request", {})
    if not created:
        raise ApiProblem(409, "slack_request_replayed", "This Slack request was already handled")


async def _session_of(services: RunServices, run_id: str) -> str | None:
    run = await services.store.get_run(run_id)
    return run.session_id if run is not None else None


def _ephemeral(text: str) -> dict[str, Any]:
    return {"response_type": "ephemeral", "replace_original": False, "text": text}


async def _why(services: RunServices, approval_id: str, problem: ApiProblem) -> str:
    """What the person who clicked is told: who decided first (the channel message shows it to everyone anyway)."""
    if problem.code == "approval_already_decided":
        record = await services.store.get_approval(approval_id)
        if record is not None:
            who = record.decided_by_name or record.decided_by or "someone"
            return f"Already {record.status} by {who}."
    return f"{problem.title}. {problem.detail}" if problem.detail else problem.title


class _Reply:
    """The interaction's `response_url` (given by the verified request): what is posted there goes after Slack was
    answered (`notifications.slack_responses`), never before: Slack wants its answer within three seconds."""

    def __init__(self, client: df.DurableOrchestrationClient, services: RunServices, interaction: SlackInteraction,
                 request: str) -> None:
        self._client, self._store, self._url, self._request = client, services.store, interaction.response_url, request

    async def later(self, session_id: str | None, message: dict[str, Any]) -> None:
        """Record the message in the run's session and start sending it. Without a run (deleted meanwhile) there is
        nowhere to keep it: nothing is sent. A failure is logged, not raised: the decision stands either way."""
        if not self._url or urlsplit(self._url).scheme not in ("https", "http") or session_id is None:
            return
        try:
            await respond_later(self._client, self._store, session_id, self._request, self._url, message)
        except Exception:
            log.exception("the Slack message update could not be scheduled")
