"""The demo brain: what the offline demo's `assistant` agent talks to when no model credentials are configured.

- asked about the weather -> calls `get_weather(city)` (one call per city: "in Paris and Rome" = parallel calls);
- asked to email someone -> calls `send_email(to, subject, body)` with a subject and body that follow the request
  ("Email bob@example.com that the report is ready"; see `demo_email`);
- a follow-up in the same session continues the earlier request ("And in Rome?" after a weather question, "And to
  carol@example.com too" after an email);
- once tool results are in -> answers in text using them (and says so when a call failed or was denied);
- asked to write (or revise) a draft -> a short draft on the topic (see `demo_writing`);
- a question about what happened ("What did you send?", "Which is warmer?") -> answered from the conversation;
- otherwise -> a short text answer; with a `json_schema` response format -> an object of that schema (a review of
  the draft when asked for one, else a sample).
A tool is only called when the request offers it and `tool_choice` is not "none", and at most once per user turn,
so an agent loop over this brain always terminates. Deterministic parsing, not a language model.
"""

from __future__ import annotations

import re

from .conversation import Conversation
from .demo_answers import EMAIL_TOOL, WEATHER_TOOL, recall, small_talk, summarise
from .demo_email import email_arguments, recipient_in
from .demo_writing import draft_answer, structured_answer
from .script import Reply, ScriptedToolCall
from .server import ScriptedModelServer

_WEATHER = re.compile(r"\b(weather|forecast|temperature|rain(ing)?|sunny)\b", re.IGNORECASE)
_EMAIL = re.compile(r"\b(e-?mail|mail)\b", re.IGNORECASE)
# A question about the past ("What did you send?", "Did the email go out?") is not a request to send one.
_QUESTION = re.compile(r"^\s*(what|who|which|did|was|were|has|have|when|where|why|is|are)\b", re.IGNORECASE)
_FOLLOW_UP = re.compile(r"^\s*(?:and|also|what\s+about|how\s+about|and\s+what\s+about|same\s+for)\b\s*(.*)$", re.I)
_PLACES = re.compile(r"\b(?:in|for|at)\s+([^?.!;:]+)", re.IGNORECASE)
_PLACE_END = re.compile(r"\s+(?:today|tomorrow|tonight|now|right now|this\s+\w+|next\s+\w+|please|too)\b.*$", re.I)
_NOT_PLACE = re.compile(r"^(?:the|it|there|that|this|then|you|me|him|her|them|to|too)$", re.IGNORECASE)

DEFAULT_CITY = "Seattle"


class DemoBrain:
    """A `Responder` (see `scripted_model.engine`) for the offline demo; stateless, so one instance serves any number
    of concurrent conversations."""

    def respond(self, conversation: Conversation) -> Reply:
        schema = conversation.request.json_schema
        if schema is not None:
            return Reply(json_output=structured_answer(schema, conversation.last_user_text))
        answered = [m for m in conversation.since_last_user if m.get("role") == "tool"]
        if answered:
            return Reply(text=summarise(conversation.tool_results[-len(answered) :], conversation))
        calls = self._tool_calls(conversation)
        if calls:
            return Reply(tool_calls=calls)
        text = conversation.last_user_text
        return Reply(text=draft_answer(text) or recall(conversation) or small_talk(text))

    def _tool_calls(self, conversation: Conversation) -> list[ScriptedToolCall]:
        if conversation.request.tool_choice == "none":
            return []
        offered = set(conversation.offered_tools)
        text = conversation.last_user_text
        intent = intent_of(text)
        follow_up = _FOLLOW_UP.match(text)
        if intent is None and follow_up:
            intent = next(filter(None, map(intent_of, conversation.earlier_user_texts)), None)
        if intent not in offered:
            return []
        if intent == WEATHER_TOOL:
            cities = cities_in(text) if intent_of(text) else follow_up_cities(follow_up.group(1) if follow_up else "")
            cities = cities or previous_cities(conversation)
            return [ScriptedToolCall(name=WEATHER_TOOL, arguments={"city": city}) for city in cities]
        if intent_of(text) == EMAIL_TOOL:
            return [ScriptedToolCall(name=EMAIL_TOOL, arguments=email_arguments(text))]
        return self._email_again(conversation, text)

    def _email_again(self, conversation: Conversation, text: str) -> list[ScriptedToolCall]:
        """ "And to carol@example.com too" after an email: the same email to the new recipient."""
        to = recipient_in(text)
        earlier = [args for _, name, args in conversation.tool_calls if name == EMAIL_TOOL]
        if not to or not earlier:
            return []
        fresh = email_arguments(f"Email {to}")
        subject, body = str(earlier[-1].get("subject") or fresh["subject"]), str(earlier[-1].get("body") or "")
        greeting, _, rest = body.partition("\n")
        body = fresh["body"].partition("\n")[0] + "\n" + rest if greeting.startswith("Hi") and rest else body
        return [ScriptedToolCall(name=EMAIL_TOOL, arguments={"to": to, "subject": subject, "body": body})]


def intent_of(text: str) -> str | None:
    """Which tool a user message asks for: a weather question, an email request (not a question about one)."""
    if _WEATHER.search(text):
        return WEATHER_TOOL
    if _EMAIL.search(text) and not _QUESTION.match(text):
        return EMAIL_TOOL
    return None


def cities_in(text: str) -> list[str]:
    """ "weather in paris and new york today?" -> ["Paris", "New York"] (default: one city)."""
    match = _PLACES.search(text)
    return (_names(match.group(1)) if match else []) or [DEFAULT_CITY]


def follow_up_cities(rest: str) -> list[str]:
    """ "in Rome?" / "Rome and Oslo?" / "tomorrow?" (after "And ...") -> ["Rome"] / ["Rome", "Oslo"] / []."""
    match = _PLACES.search(rest)
    return _names(match.group(1) if match else re.split(r"[?.!;:]", rest, maxsplit=1)[0])


def previous_cities(conversation: Conversation) -> list[str]:
    cities = [args["city"] for _, name, args in conversation.tool_calls if name == WEATHER_TOOL and "city" in args]
    return cities[-1:] or [DEFAULT_CITY]


def _names(places: str) -> list[str]:
    places = _PLACE_END.sub("", places)
    names = re.split(r"\s*(?:,|\band\b|&)\s*", places, flags=re.IGNORECASE)
    cities = [" ".join(w[:1].upper() + w[1:] for w in n.split()) for n in names if n.strip()]
    return [c for c in dict.fromkeys(cities) if not _NOT_PLACE.match(c)]


def start_demo_server(*, latency_ms: float = 0.0, chunk_delay_ms: float = 0.0, port: int = 0) -> ScriptedModelServer:
    """The offline demo's model: the demo brain on a free 127.0.0.1 port in a background thread. Point the model
    client at `.base_url` (model name: anything, e.g. "scripted-model") and call `.stop()` at shutdown."""
    server = ScriptedModelServer(DemoBrain(), port=port, latency_ms=latency_ms, chunk_delay_ms=chunk_delay_ms)
    return server.start()
