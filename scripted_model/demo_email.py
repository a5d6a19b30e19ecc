"""The demo brain's email writer: turns a request such as "Email bob@example.com that the report is ready" into
`send_email` arguments whose subject and body follow it (deterministic parsing, not a language model).

Recognised shapes (the recipient is an address, or a capitalised name that becomes name@example.com):
- "... that X" / "... saying X" / "... to say X" / "... to tell him X" / "...: X"  -> the message is X;
- "... about X" / "... regarding X"                                                  -> the topic is X;
- "... to ask (whether|if|for) X"                                                    -> a question about X.
"""

from __future__ import annotations

import re

_ADDRESS = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
# A name after a verb or "to": "email Alice ...", "send a note to Bob ...", "tell Carol ..."
_NAME = re.compile(r"\b(?i:to|e-?mail|mail|tell|message|write)\s+([A-Z][a-z]+)\b")
_NOT_NAMES = {"The", "This", "That", "Say", "Tell", "Ask", "Let", "Me", "Everyone", "Him", "Her", "Them"}
_MESSAGE = re.compile(
    r"(?:\b(?:that|saying|to\s+say(?:\s+that)?|to\s+tell\s+(?:him|her|them)(?:\s+that)?|to\s+let\s+(?:him|her|them)"
    r"\s+know(?:\s+that)?)\s+|:\s*)(?P<text>.+)$",
    re.IGNORECASE | re.DOTALL,
)
_TOPIC = re.compile(r"\b(?:about|regarding|re:?|subject:?)\s+(?P<text>.+)$", re.IGNORECASE | re.DOTALL)
_ASK = re.compile(r"\bto\s+ask\s+(?P<how>whether|if|for|about|when|what|why|how)?\s*(?P<text>.+)$", re.IGNORECASE)
_GREETING = re.compile(r"^(?:hi|hello|hey|hiya|good\s+(?:morning|afternoon|evening))\b[\s!.]*$", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_TRAILING = re.compile(r"[\s.!?,;:]+$")
_PLEASE = re.compile(r"\s*,?\s*\bplease\b\s*$", re.IGNORECASE)
SUBJECT_LIMIT = 60
SIGN_OFF = "Best regards"


def recipient_in(text: str) -> str | None:
    """The address a request names: an email address, or "Bob" -> bob@example.com."""
    address = _ADDRESS.search(text)
    if address:
        return address.group(0)
    for name in _NAME.findall(text):
        if name not in _NOT_NAMES:
            return f"{name.lower()}@example.com"
    return None


def greeting_name(address: str) -> str:
    """bob@example.com -> "Bob", jane.doe@example.com -> "Jane"."""
    local = re.split(r"[.+_-]", address.split("@", 1)[0])[0]
    return local[:1].upper() + local[1:] if local.isalpha() and local != "someone" else ""


def email_arguments(text: str) -> dict[str, str]:
    """`send_email` arguments for a request in plain words."""
    to = recipient_in(text) or "someone@example.com"
    rest = _after_recipient(text, to)
    subject, paragraph = _subject_and_paragraph(rest)
    name = greeting_name(to)
    greeting = f"Hi {name}," if name else "Hi,"
    return {"to": to, "subject": subject, "body": f"{greeting}\n\n{paragraph}\n\n{SIGN_OFF}"}


def _after_recipient(text: str, to: str) -> str:
    """The part of the request after the recipient (where its content is), else the whole request."""
    local = to.split("@", 1)[0]
    for needle in (to, local[:1].upper() + local[1:]):
        at = text.find(needle)
        if at >= 0:
            return text[at + len(needle) :]
    return text


def _subject_and_paragraph(rest: str) -> tuple[str, str]:
    message = _MESSAGE.search(rest)
    if message:
        said = _clean(message.group("text"))
        if not said or _GREETING.match(said):
            return "Hello", "Just saying hello!"
        return _subject(said), _sentences(said)
    ask = _ASK.search(rest)
    if ask:
        how, question = (ask.group("how") or "").lower(), _clean(ask.group("text"))
        asked = f"{how} {question}".strip()
        subject = (
            "A quick question" if how in ("whether", "if") else _subject(question if how in ("for", "about") else asked)
        )
        return subject, f"I wanted to ask {asked}."
    topic = _TOPIC.search(rest)
    if topic:
        about = _clean(topic.group("text"))
        return _subject(about), f"I wanted to get in touch about {_lower_first(about)}."
    return "Hello", "Just saying hello!"


def _clean(text: str) -> str:
    text = _PLEASE.sub("", text.strip())
    return _TRAILING.sub("", " ".join(text.split()))


def _subject(text: str) -> str:
    """The first sentence, capitalised, cut at a word boundary to fit a subject line."""
    first = _TRAILING.sub("", _SENTENCE_END.split(text, maxsplit=1)[0])
    if len(first) > SUBJECT_LIMIT:
        first = first[: SUBJECT_LIMIT + 1].rsplit(" ", 1)[0].rstrip(",;:") + "..."
    return first[:1].upper() + first[1:]


def _sentences(text: str) -> str:
    """The message as sentences: each capitalised, the last one ended."""
    parts = [p[:1].upper() + p[1:] for p in _SENTENCE_END.split(text)]
    joined = " ".join(parts)
    return joined if joined[-1:] in ".!?" else joined + "."


def _lower_first(text: str) -> str:
    """Lower-case the first letter unless the first word looks like a name or acronym ("Q3", "Paris")."""
    first = text.split(" ", 1)[0]
    return text if first[1:] != first[1:].lower() or first == "I" else text[:1].lower() + text[1:]
