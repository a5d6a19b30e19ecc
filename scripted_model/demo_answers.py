"""The demo brain's text answers: tool results put in words, questions about what happened earlier in the session
("What did you send?", "Which city is warmer?") answered from the conversation, and small talk."""

from __future__ import annotations

import json
import re
from typing import Any

from .conversation import Conversation, ToolResult

WEATHER_TOOL = "get_weather"
EMAIL_TOOL = "send_email"

_FAILED = re.compile(r"\b(error|denied|rejected|failed|not approved)\b", re.IGNORECASE)
_DENIED = re.compile(r"\b(?:denied|rejected)\b[^:]*(?::\s*(.+))?$", re.IGNORECASE | re.DOTALL)
_ASKS_EMAIL = re.compile(r"\b(e-?mail|mail|send|sent|wrote|write|message|subject|body)\b", re.IGNORECASE)
_ASKS_WEATHER = re.compile(r"\b(weather|warm|warmer|warmest|cold|colder|coldest|hot|hotter|temperature)\b", re.I)
_COLDER = re.compile(r"\b(cold|colder|coldest|cool|cooler|coolest)\b", re.IGNORECASE)
_THANKS = re.compile(r"\b(thanks|thank\s+you|cheers|great|perfect)\b", re.IGNORECASE)
_GREETING = re.compile(r"^\s*(hi|hello|hey|good\s+(morning|afternoon|evening))\b", re.IGNORECASE)
CAPABILITIES = (
    'I am the offline demo model: ask me about the weather somewhere (e.g. "What is the weather in Paris?") '
    'or to email someone (e.g. "Email alice@example.com that the report is ready").'
)


def _json(content: str) -> Any:
    try:
        return json.loads(content)
    except ValueError:
        return None


def summarise(results: list[ToolResult], conversation: Conversation) -> str:
    """The answer once this turn's tool results are in."""
    lines = []
    for result in results:
        if result.name == EMAIL_TOOL:
            lines.append(describe_email_result(result, conversation))
        elif _FAILED.search(result.content):
            lines.append(f"I could not complete {result.name or 'the tool call'}: {result.content}")
        elif result.name == WEATHER_TOOL:
            lines.append(describe_weather(result.content))
        else:
            lines.append(f"{result.name or 'Tool'} returned: {result.content}")
    return "\n".join(lines)


def describe_email_result(result: ToolResult, conversation: Conversation) -> str:
    data = _json(result.content)
    if isinstance(data, dict) and data.get("status") in ("sent", "already_sent"):
        return f'Done: I emailed {data.get("to")} with the subject "{data.get("subject")}".'
    arguments = conversation.call_arguments(result.call_id)
    to = f" to {arguments['to']}" if isinstance(arguments.get("to"), str) else ""
    denied = _DENIED.search(result.content)
    if denied:
        reason = f" ({denied.group(1).strip()})" if denied.group(1) else ""
        return f"I did not send the email{to}: you rejected it{reason}."
    if _FAILED.search(result.content):
        return f"I could not send the email{to}: {result.content}"
    return f"The email{to} is done ({result.content})."


def describe_weather(content: str) -> str:
    """`{"city": "Paris", "condition": "windy", "temperature_c": 9}` -> "In Paris it is windy, 9 °C." (any other
    result is quoted as it came)."""
    data = _json(content)
    if isinstance(data, dict) and {"city", "condition"} <= data.keys():
        temperature = f", {data['temperature_c']} °C" if "temperature_c" in data else ""
        return f"In {data['city']} it is {data['condition']}{temperature}."
    return f"Weather: {content}"


def recall(conversation: Conversation) -> str | None:
    """An answer to a question about what happened earlier in this session, or None if it is not one."""
    text = conversation.last_user_text
    if _ASKS_EMAIL.search(text):
        return recall_emails(conversation)
    if _ASKS_WEATHER.search(text):
        return recall_weather(conversation, colder=bool(_COLDER.search(text)))
    return None


def recall_emails(conversation: Conversation) -> str | None:
    outcomes = {r.call_id: r.content for r in conversation.tool_results if r.name == EMAIL_TOOL}
    emails = [(call_id, args) for call_id, name, args in conversation.tool_calls if name == EMAIL_TOOL]
    if not emails:
        return "I have not sent any email in this conversation yet."
    call_id, args = emails[-1]
    outcome = outcomes.get(call_id, "")
    what = f'to {args.get("to")} with the subject "{args.get("subject")}":\n\n{args.get("body", "")}'
    if not outcome:
        return f"I proposed an email {what}\n\nIt is waiting for approval."
    if _FAILED.search(outcome):
        return f"I proposed an email {what}\n\nIt was not sent: {outcome}"
    return f"I sent an email {what}"


def recall_weather(conversation: Conversation, *, colder: bool) -> str | None:
    reports = [_json(r.content) for r in conversation.tool_results if r.name == WEATHER_TOOL]
    known = {r["city"]: r for r in reports if isinstance(r, dict) and "city" in r and "temperature_c" in r}
    if not known:
        return None
    lines = [describe_weather(json.dumps(r)) for r in known.values()]
    if len(known) > 1:
        pick = (min if colder else max)(known.values(), key=lambda r: r["temperature_c"])
        lines.append(f"{pick['city']} is the {'coldest' if colder else 'warmest'} of these.")
    return " ".join(lines)


def small_talk(user_text: str) -> str:
    if _GREETING.match(user_text):
        return f"Hello! {CAPABILITIES}"
    if _THANKS.search(user_text):
        return "You are welcome!"
    quoted = user_text.strip().replace("\n", " ")
    if len(quoted) > 200:
        quoted = quoted[:197] + "..."
    return f'You said: "{quoted}". {CAPABILITIES}'
