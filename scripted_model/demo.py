"""The demo brain: what the offline demo's `assistant` agent talks to when no model credentials are configured.

- asked about the weather -> calls `get_weather(city)` (one call per city: "in Paris and Rome" = parallel calls);
- asked to email someone -> calls `send_email(to, subject, body)`;
- once tool results are in -> answers in text using them (and says so when a call failed or was denied);
- otherwise -> a short text answer; with a `json_schema` response format -> a sample object of that schema.
A tool is only called when the request offers it and `tool_choice` is not "none", and at most once per user turn,
so an agent loop over this brain always terminates.
"""

from __future__ import annotations

import json
import re

from .conversation import Conversation, ToolResult
from .schema_sample import sample_for_schema
from .script import Reply, ScriptedToolCall
from .server import ScriptedModelServer

WEATHER_TOOL = "get_weather"
EMAIL_TOOL = "send_email"

_WEATHER = re.compile(r"\b(weather|forecast|temperature|rain(ing)?|sunny)\b", re.IGNORECASE)
_EMAIL = re.compile(r"\b(e-?mail|mail)\b", re.IGNORECASE)
_PLACES = re.compile(r"\b(?:in|for|at)\s+([^?.!;:]+)", re.IGNORECASE)
_PLACE_END = re.compile(r"\s+(?:today|tomorrow|tonight|now|right now|this\s+\w+|next\s+\w+|please)\b.*$", re.IGNORECASE)
_ADDRESS = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_RECIPIENT = re.compile(r"\b(?:to|email|mail)\s+([A-Z][a-z]+)\b")
_SUBJECT = re.compile(r"\b(?:about|regarding|re:?|subject:?)\s+(.+?)(?:[.!?]|$)", re.IGNORECASE)
_FAILED = re.compile(r"\b(error|denied|rejected|failed|not approved)\b", re.IGNORECASE)

DEFAULT_CITY = "Seattle"


class DemoBrain:
    """A `Responder` (see `scripted_model.engine`) for the offline demo; stateless, so one instance serves any number
    of concurrent conversations."""

    def respond(self, conversation: Conversation) -> Reply:
        schema = conversation.request.json_schema
        if schema is not None:
            return Reply(json_output=sample_for_schema(schema))
        answered = [m for m in conversation.since_last_user if m.get("role") == "tool"]
        if answered:
            return Reply(text=summarise(conversation.tool_results[-len(answered) :]))
        calls = self._tool_calls(conversation)
        if calls:
            return Reply(tool_calls=calls)
        return Reply(text=small_talk(conversation.last_user_text))

    def _tool_calls(self, conversation: Conversation) -> list[ScriptedToolCall]:
        if conversation.request.tool_choice == "none":
            return []
        offered = set(conversation.offered_tools)
        text = conversation.last_user_text
        if WEATHER_TOOL in offered and _WEATHER.search(text):
            return [ScriptedToolCall(name=WEATHER_TOOL, arguments={"city": city}) for city in cities_in(text)]
        if EMAIL_TOOL in offered and _EMAIL.search(text):
            return [ScriptedToolCall(name=EMAIL_TOOL, arguments=email_arguments(text))]
        return []


def cities_in(text: str) -> list[str]:
    """ "weather in paris and new york today?" -> ["Paris", "New York"] (default: one city)."""
    match = _PLACES.search(text)
    if not match:
        return [DEFAULT_CITY]
    places = _PLACE_END.sub("", match.group(1))
    names = re.split(r"\s*(?:,|\band\b|&)\s*", places, flags=re.IGNORECASE)
    cities = [" ".join(w[:1].upper() + w[1:] for w in n.split()) for n in names if n.strip()]
    return list(dict.fromkeys(cities)) or [DEFAULT_CITY]


def email_arguments(text: str) -> dict[str, str]:
    address = _ADDRESS.search(text)
    if address:
        to = address.group(0)
    else:
        name = _RECIPIENT.search(text)
        to = f"{name.group(1).lower()}@example.com" if name else "someone@example.com"
    subject_match = _SUBJECT.search(text)
    subject = subject_match.group(1).strip() if subject_match else "Hello"
    body = f"Hi,\n\nA quick note about {subject.lower()}.\n\nBest regards"
    return {"to": to, "subject": subject[:1].upper() + subject[1:], "body": body}


def summarise(results: list[ToolResult]) -> str:
    lines = []
    for result in results:
        if _FAILED.search(result.content):
            lines.append(f"I could not complete {result.name or 'the tool call'}: {result.content}")
        elif result.name == WEATHER_TOOL:
            lines.append(describe_weather(result.content))
        elif result.name == EMAIL_TOOL:
            lines.append(f"Done - the email was sent ({result.content}).")
        else:
            lines.append(f"{result.name or 'Tool'} returned: {result.content}")
    return "\n".join(lines)


def describe_weather(content: str) -> str:
    """`{"city": "Paris", "condition": "windy", "temperature_c": 9}` -> "In Paris it is windy, 9 °C." (any other
    result is quoted as it came)."""
    try:
        data = json.loads(content)
    except ValueError:
        data = None
    if isinstance(data, dict) and {"city", "condition"} <= data.keys():
        temperature = f", {data['temperature_c']} °C" if "temperature_c" in data else ""
        return f"In {data['city']} it is {data['condition']}{temperature}."
    return f"Weather: {content}"


def small_talk(user_text: str) -> str:
    quoted = user_text.strip().replace("\n", " ")
    if len(quoted) > 200:
        quoted = quoted[:197] + "..."
    return (
        f'You said: "{quoted}". I am the offline demo model: ask me about the weather somewhere '
        '(e.g. "What is the weather in Paris?") or to email someone (e.g. "Email alice@example.com about the launch").'
    )


def start_demo_server(*, latency_ms: float = 0.0, chunk_delay_ms: float = 0.0, port: int = 0) -> ScriptedModelServer:
    """The offline demo's model: the demo brain on a free 127.0.0.1 port in a background thread. Point the model
    client at `.base_url` (model name: anything, e.g. "scripted-model") and call `.stop()` at shutdown."""
    server = ScriptedModelServer(DemoBrain(), port=port, latency_ms=latency_ms, chunk_delay_ms=chunk_delay_ms)
    return server.start()
