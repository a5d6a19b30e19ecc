"""Text from outside that may not be text: a model can send a lone UTF-16 surrogate (a JSON `\\ud800` escape with no
pair), which Python keeps in a `str` but which no UTF-8 encoder takes - storing, serialising or streaming it fails.
It becomes U+FFFD, as UTF-8 JSON encoders write it; a pair whose halves arrived apart (two stream deltas) becomes its
character once the halves meet.

Text from outside that must be text (a request body, a tool's arguments) is refused instead: `json_limits` finds a
surrogate with `SURROGATE`, as parsed (a pair escaped in JSON is one character then, so any surrogate left is lone)."""

from __future__ import annotations

import re

SURROGATE = re.compile("[\ud800-\udfff]")
"""A UTF-16 surrogate code point in a `str` (well-formed text has none)."""


def well_formed(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD (`text` itself when it has none: one encode)."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def utf8(text: str) -> bytes:
    """`text` as UTF-8, lone surrogates as U+FFFD."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        return well_formed(text).encode()


__all__ = ["SURROGATE", "utf8", "well_formed"]
