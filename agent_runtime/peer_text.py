"""Text a peer wrote (an MCP server's error message, tool name or stderr line), as the app quotes it in its logs,
errors and records: `peer_text` masks its secrets, then escapes its control characters.

A server's text with a line break, a carriage return or a terminal escape reached the host's log as it was: a
misbehaving server could forge log lines (`\\n2026-01-01 ERROR ...`) or rewrite a terminal. Escaped as Python writes
them (`\\n`, `\\x1b`), one record stays one line; backslashes are left as they are (for reading, not parsing).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .redaction import redact_quoted

# C0 and C1 control characters, DEL, the Unicode line and paragraph separators (line breaks to many readers), and the
# bidirectional controls (marks, embeddings, overrides, isolates): a U+202E shows the rest of a log line reversed.
_OTHER_CONTROLS = r"\x7f-\x9f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_CONTROL = re.compile(rf"[\x00-\x1f{_OTHER_CONTROLS}]")
_CONTROL_BUT_LINE_FEED = re.compile(rf"[\x00-\x09\x0b-\x1f{_OTHER_CONTROLS}]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def escape_controls(text: str, *, keep_line_feeds: bool = False) -> str:
    """`text` with its control characters written as escapes (`\\n`, `\\r`, `\\t`, `\\x1b`, `\\u2028`); its line
    feeds kept when asked (a traceback's lines: the other controls, a carriage return included, are escaped)."""
    return (_CONTROL_BUT_LINE_FEED if keep_line_feeds else _CONTROL).sub(_escaped, text)


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    return _NAMED.get(char) or (f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")


def peer_text(text: str, secrets: Iterable[str] = ()) -> str:
    """What a peer wrote, fit to log and record: secrets masked (`redact_quoted`: known ones, `secrets`, and a
    secret's start or end at a library's cut), then control characters escaped. Masked first: an escape would split
    a secret that holds a control character. Cut it after, if at all: a secret cut in two is no longer recognised."""
    return escape_controls(redact_quoted(text, secrets))


__all__ = ["escape_controls", "peer_text"]
