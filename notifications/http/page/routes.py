"""The decision page's two routes (see the package's docstring)."""

from __future__ import annotations

import html
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import azure.functions as func
from pydantic import BaseModel

from agent_runs.services import RunServices
from http_api.access import visible_approvals
from http_api.adapter import http_endpoint, json_response
from http_api.approvals import ApprovalView
from http_api.caller import public
from http_api.problems import ApiProblem, not_found
from http_api.ui.serve import SECURITY_HEADERS
from notifications.activities import link_secrets
from notifications.links import LinkError, verify_link
from notifications.payloads import arguments_text
from session_store import MessageRecord

TEMPLATE = Path(__file__).with_name("decide.html")
CONTEXT_MESSAGES = 6
MAX_MESSAGE_TEXT = 2000


@cache
def _template() -> str:
    return TEMPLATE.read_text(encoding="utf-8")


@http_endpoint
@public
async def decision_page(req: func.HttpRequest) -> func.HttpResponse:
    """The page, only for a valid link (the link is checked, not trusted: it grants nothing but the page)."""
    approval_id = req.route_params["approval_id"]
    token = req.params.get("link") or ""
    try:
        run_id = verify_link(link_secrets(RunServices.current()), token, approval_id=approval_id, now=datetime.now(UTC))
    except LinkError as error:
        raise ApiProblem(403, "decision_link_invalid", "This decision link is not valid", f"query.link: {error}",
                         field="query.link") from error
    body = _template().replace("{{RUN_ID}}", html.escape(run_id)).replace("{{APPROVAL_ID}}", html.escape(approval_id))
    return func.HttpResponse(body, status_code=200, headers={"Content-Type": "text/html; charset=utf-8",
                                                             **SECURITY_HEADERS})


class ContextMessage(BaseModel):
    role: str
    text: str


class ApprovalContext(BaseModel):
    approval: ApprovalView
    agent: str
    run_status: str
    arguments_text: str | None
    messages: list[ContextMessage]


@http_endpoint
async def approval_context(req: func.HttpRequest) -> func.HttpResponse:
    """What the approver sees: the run's owner, or an approver allowed to decide this approval (404 otherwise)."""
    store = RunServices.current().store
    approval_id = req.route_params["approval_id"]
    run, records = await visible_approvals(store, req.route_params["run_id"])
    record = next((r for r in records if r.approval_id == approval_id), None)
    if record is None:
        raise not_found("approval_not_found", "Approval", approval_id, field="path.approval_id")
    last = await store.last_seq(run.session_id) or 0  # only the tail: the page shows the last few
    page = await store.list_messages(run.session_id, run_id=run.run_id, after_seq=max(last - 60, -1), limit=100)
    messages = [m for m in (_context_message(r) for r in page.items) if m is not None][-CONTEXT_MESSAGES:]
    return json_response(ApprovalContext(
        approval=ApprovalView.of(record, run), agent=run.agent, run_status=run.status,
        arguments_text=arguments_text(record.arguments), messages=messages,
    ))


def _context_message(record: MessageRecord) -> ContextMessage | None:
    parts: list[str] = []
    for content in record.payload.get("contents") or []:
        parts.extend(_content_text(content))
    text = "\n".join(p for p in parts if p)
    if not text:
        return None
    return ContextMessage(role=record.role, text=text[:MAX_MESSAGE_TEXT])


def _content_text(content: Any) -> list[str]:
    if not isinstance(content, dict):
        return []
    kind = content.get("type")
    if kind == "text":
        return [str(content.get("text") or "")]
    if kind == "function_call":
        return [f"→ calls {content.get('name')}"]
    if kind == "function_result":
        return ["← tool result"]
    if kind == "function_approval_request":
        return ["(asks for approval)"]
    if kind == "function_approval_response":
        return ["(approved)" if content.get("approved") else "(rejected)"]
    return []
