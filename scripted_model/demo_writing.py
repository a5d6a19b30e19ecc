"""The demo brain's writing desk: a drafting request ("Write a short draft about durable agents for general
readers.") gets a short draft on that topic, a revision request ("Revise this draft following the review. ...
Draft: ...") the draft with what a review asks for, and a review asked for as structured output ("Review this
draft: ...", with a JSON schema) a verdict that fits the schema and talks about the draft. Deterministic templates,
not a language model: enough for the offline demo's `review_pipeline` to read sensibly."""

from __future__ import annotations

import re
from typing import Any

from .schema_sample import sample_for_schema


def _request(*verbs: str) -> re.Pattern[str]:
    """A request that starts with one of the verbs ("Write ...", "Please review ...")."""
    return re.compile(rf"^\s*(?:please\s+)?(?:{'|'.join(verbs)})\b", re.IGNORECASE)


def _field(*words: str) -> re.Pattern[str]:
    """A field named by one of the words, as a word of a snake_case name ("review_score"; "reviewer" is not one)."""
    return re.compile(rf"(?:^|_)(?:{'|'.join(words)})s?(?:$|_)", re.IGNORECASE)


_DRAFT, _REVISE, _REVIEW = (
    _request("write", "draft", "compose"),
    _request("revise", "rewrite", "improve"),
    _request("review", "assess", "critique", "evaluate"),
)
_VERDICT_FIELDS, _SCORE_FIELDS = (
    _field("verdict", "decision", "outcome", "recommendation"),
    _field("score", "rating", "grade", "mark"),
)
_COMMENT_FIELDS = _field("comment", "feedback", "note", "reason", "summary", "remark")
_TOPIC = re.compile(r"\b(?:about|on)\s+(.+?)(?:\s+for\s+([^.!?]+?))?\s*[.!?]*$", re.IGNORECASE)
_DRAFT_PART = re.compile(r"^\s*draft:\s*$", re.IGNORECASE | re.MULTILINE)
_EXAMPLE = re.compile(r"\b(for example|for instance|e\.g\.)", re.IGNORECASE)
_REVISE_WORDS, _APPROVE_WORDS = (
    re.compile(r"revis|change|rework|reject", re.I),
    re.compile(r"approv|accept|pass|ok", re.I),
)
EXAMPLE_PARAGRAPH = (
    "For example: pick one small, real task, try it there first, note what changed, and share the result before "
    "going further."
)


def draft_answer(text: str) -> str | None:
    """A draft for a drafting request, a revised draft for a revision request, else None."""
    if _REVISE.match(text):
        return revise(text)
    if not _DRAFT.match(text):
        return None
    match = _TOPIC.search(text.strip().splitlines()[0])
    topic = match.group(1).strip() if match else "your topic"
    audience = match.group(2).strip() if match and match.group(2) else "readers"
    return draft(topic, audience)


def draft(topic: str, audience: str) -> str:
    # Worded so that a singular or a plural topic reads right ("durable agents", "a tide pool").
    return (
        f"{topic[:1].upper() + topic[1:]}: a short introduction\n\n"
        f"More and more people ask about {topic}, and {audience} do not need the jargon to see what it offers. "
        f"At its core, the idea is to do one job reliably and to be able to say how it is done.\n\n"
        f"The best way in is small: learn the one idea behind {topic}, see where it helps, and build from there."
    )


def revise(text: str) -> str:
    """The draft quoted after "Draft:" (else the whole request) with a concrete example added."""
    parts = _DRAFT_PART.split(text, maxsplit=1)
    original = (parts[1] if len(parts) == 2 else text).strip()
    return original if _EXAMPLE.search(original) else f"{original}\n\n{EXAMPLE_PARAGRAPH}"


def structured_answer(schema: dict[str, Any], text: str) -> Any:
    """A value of `schema`: a review of the draft in `text` when it asks for one, else a sample."""
    value = sample_for_schema(schema)
    properties = schema.get("properties")
    if not _REVIEW.match(text) or not isinstance(value, dict) or not isinstance(properties, dict):
        return value
    reviewed = text.split("\n", 1)[1].strip() if "\n" in text else text
    wants_revision = not _EXAMPLE.search(reviewed)
    for name, field in properties.items():
        if isinstance(field, dict):
            value[name] = _review_field(name, field, value[name], reviewed, wants_revision)
    return value


def _review_field(name: str, field: dict[str, Any], sample: Any, draft_text: str, wants_revision: bool) -> Any:
    if _VERDICT_FIELDS.search(name) and field.get("enum"):
        wanted = _REVISE_WORDS if wants_revision else _APPROVE_WORDS
        return next((v for v in field["enum"] if isinstance(v, str) and wanted.search(v)), sample)
    if _SCORE_FIELDS.search(name) and field.get("type") in ("integer", "number"):
        low = field.get("minimum", 0)
        high = max(field.get("maximum", low + 10), low)
        score = low + (high - low) * (0.6 if wants_revision else 0.8)
        return round(score) if field["type"] == "integer" else score
    if _COMMENT_FIELDS.search(name) and field.get("type") == "string":
        words = len(draft_text.split())
        title = draft_text.strip().splitlines()[0].strip() if draft_text.strip() else "the draft"
        comments = (
            f'"{title}" is clear and short ({words} words), but it stays general: add a concrete example.'
            if wants_revision
            else f'"{title}" is clear and short ({words} words), and its example makes the point concrete.'
        )
        limit = field.get("maxLength")
        if isinstance(limit, int) and len(comments) > limit:
            comments = comments[: limit + 1].rsplit(" ", 1)[0][:limit]  # cut at a word where there is one
        return comments
    return sample
