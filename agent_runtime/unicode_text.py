"""Text from outside that may not be text: a model can send a lone UTF-16 surrogate (a JSON `\\ud800` escape with no
pair), which Python keeps in a `str` but which no UTF-8 encoder takes - storing, serialising or streaming it fails.
It becomes U+FFFD, as UTF-8 JSON encoders write it; a pair whose halves arrived apart (two stream deltas) becomes its
character once the halves meet."""

from __future__ import annotations


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
