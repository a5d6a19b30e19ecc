"""How each channel shows an event (sans-IO): the Standard Webhooks JSON body, a Slack Block Kit message with
Approve / Reject buttons, a Teams Adaptive Card (1.5) whose buttons open the decision page."""

from __future__ import annotations

import json
from typing import Any

from notifications.events import NotificationEvent

MAX_ARGUMENTS_TEXT = 2500  # Slack's section text limit is 3000; a card should stay readable too
ADAPTIVE_CARD_SCHEMA = "http://adaptivecards.io/schemas/adaptive-card.json"


def webhook_body(event: NotificationEvent) -> str:
    return json.dumps(event.body(), separators=(",", ":"), ensure_ascii=False)


def arguments_text(arguments: Any) -> str | None:
    """Readable arguments: multi-line strings stay multi-line (not `\\n` escapes)."""
    if not isinstance(arguments, dict) or not arguments:
        return None
    lines = []
    for name, value in arguments.items():
        if isinstance(value, str):
            lines.append(f"{name}:\n{value}" if "\n" in value else f"{name}: {value}")
        else:
            lines.append(f"{name}: {json.dumps(value, ensure_ascii=False)}")
    text = "\n".join(lines)
    return text if len(text) <= MAX_ARGUMENTS_TEXT else text[: MAX_ARGUMENTS_TEXT - 1] + "…"


def _who(data: dict[str, Any]) -> str:
    who = data.get("escalated_to") or ", ".join(data.get("approvers") or []) or "owner"
    return who + (" (not the requester)" if data.get("separation_of_duties") else "")


def slack_message(event: NotificationEvent) -> dict[str, Any]:
    data = event.data
    title = f"Approval needed: {data['tool']} ({data['agent']})"
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": "Approval needed"[:150]}},
        {"type": "section", "fields": [
            {"type": "mrkdwn", "text": f"*Tool*\n`{data['tool']}`"},
            {"type": "mrkdwn", "text": f"*Agent*\n{data['agent']}"},
            {"type": "mrkdwn", "text": f"*Expires*\n{data.get('expires_at') or 'never'}"},
            {"type": "mrkdwn", "text": f"*Who may decide*\n{_who(data)}"},
        ]},
    ]
    text = arguments_text(data.get("arguments"))
    if text:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": f"```{text}```"}})
    buttons: list[dict[str, Any]] = [
        {"type": "button", "action_id": "approve", "style": "primary", "value": data["approval_id"],
         "text": {"type": "plain_text", "text": "Approve"}},
        {"type": "button", "action_id": "reject", "style": "danger", "value": data["approval_id"],
         "text": {"type": "plain_text", "text": "Reject"}},
    ]
    page = data.get("links", {}).get("page")
    if page and page.startswith("https://"):
        buttons.append({"type": "button", "action_id": "open", "url": page,
                        "text": {"type": "plain_text", "text": "Open / edit"}})
    blocks.append({"type": "actions", "block_id": f"approval:{data['run_id']}", "elements": buttons})
    return {"text": title, "blocks": blocks}


def slack_outcome(original: dict[str, Any] | None, outcome: str) -> dict[str, Any]:
    """The message after a decision: the buttons replaced by who decided what (`response_url`'s
    `replace_original`)."""
    blocks = [b for b in (original or {}).get("blocks", []) if b.get("type") != "actions"]
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": outcome}]})
    return {"replace_original": True, "text": outcome, "blocks": blocks}


def adaptive_card(event: NotificationEvent) -> dict[str, Any]:
    data = event.data
    page = data.get("links", {}).get("page") or data.get("links", {}).get("api")
    body: list[dict[str, Any]] = [
        {"type": "TextBlock", "text": "Approval needed", "weight": "Bolder", "size": "Medium", "wrap": True},
        {"type": "FactSet", "facts": [
            {"title": "Tool", "value": str(data["tool"])},
            {"title": "Agent", "value": str(data["agent"])},
            {"title": "Expires", "value": str(data.get("expires_at") or "never")},
            {"title": "Who may decide", "value": _who(data)},
        ]},
    ]
    text = arguments_text(data.get("arguments"))
    if text:
        body.append({"type": "TextBlock", "text": text, "fontType": "Monospace", "wrap": True})
    card = {
        "type": "AdaptiveCard",
        "$schema": ADAPTIVE_CARD_SCHEMA,
        "version": "1.5",
        "body": body,
        "actions": [
            {"type": "Action.OpenUrl", "title": "Approve…", "url": page},
            {"type": "Action.OpenUrl", "title": "Reject…", "url": page},
        ],
    }
    return {"type": "message", "attachments": [
        {"contentType": "application/vnd.microsoft.card.adaptive", "contentUrl": None, "content": card}
    ]}
