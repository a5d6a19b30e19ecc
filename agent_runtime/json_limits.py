"""The one reader for JSON text from outside (request bodies, a model's answers and tool arguments), with the limits
every later step can take.

Python's `json` accepts what the rest of the app cannot: nesting ~1,000 deep (then `RecursionError`), integers of
thousands of digits (past 4,300 a `ValueError`, and slow before), `NaN`/`Infinity` (not JSON; other parsers refuse
them) and `1e999` (infinity). Worse, a value stored at the edge is parsed again later by pydantic, whose JSON parser
stops at 200 levels: a signal payload 200 deep was accepted, then failed every retry of the durable step that read it
back. So a value is refused where it enters, at limits well inside what the durable steps take (a payload is wrapped
in a few levels of records and history on the way). Likewise a lone UTF-16 surrogate (`"\\ud800"` with no pair):
valid escape syntax, but no Unicode text (I-JSON forbids it); every later step that stores or sends it as UTF-8
(SQLite, Cosmos, a JSON answer, the error naming it) fails.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from .unicode_text import SURROGATE

MAX_JSON_DEPTH = 64
"""Nesting levels of a whole JSON document (objects and arrays). pydantic parses stored records up to 200."""
MAX_INTEGER_DIGITS = 15
"""Digits of an integer: every such integer is exact as a double (I-JSON, RFC 7493), as Cosmos DB and JavaScript
clients read numbers; a longer one would come back changed."""
MAX_NUMBER_CHARS = 64
"""Characters of any number literal (a float's shortest exact form is at most 24)."""


# A surrogate escape in the text (`\ud800`-`\udfff`; a pair is one character once parsed), or a surrogate itself:
# only then is the parsed value searched for one left alone.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
# In bytes, also a surrogate encoded as UTF-8 (`\xed\xa0`-`\xed\xbf`: `json.loads` decodes bytes with "surrogatepass").
_SURROGATE_ESCAPE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")


class JsonLimitError(ValueError):
    """JSON text past a limit. `kind`: "depth", "number", "syntax" or "unicode" (a lone surrogate)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def _integer(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INTEGER_DIGITS:
        raise JsonLimitError("number", f"an integer has {len(text.lstrip('-'))} digits; at most {MAX_INTEGER_DIGITS}")
    return int(text)


def _float(text: str) -> float:
    if len(text) > MAX_NUMBER_CHARS:
        raise JsonLimitError("number", f"a number has {len(text)} characters; at most {MAX_NUMBER_CHARS}")
    value = float(text)
    if not math.isfinite(value):
        raise JsonLimitError("number", f"the number {text[:30]} is out of range")
    return value


def _constant(name: str) -> Any:
    raise JsonLimitError("syntax", f"{name} is not JSON")


def loads(text: str | bytes | bytearray) -> Any:
    """`json.loads` within the limits: raises `JsonLimitError` past one and `json.JSONDecodeError` (or
    `UnicodeDecodeError`) for text that is not JSON."""
    try:
        value = json.loads(text, parse_int=_integer, parse_float=_float, parse_constant=_constant)
    except RecursionError:
        raise JsonLimitError("depth", f"the JSON nests deeper than {MAX_JSON_DEPTH} levels") from None
    check_depth(value)
    if _may_hold_surrogates(text):
        _check_text(value)
    return value


def _may_hold_surrogates(text: str | bytes | bytearray) -> bool:
    if isinstance(text, str):
        return _SURROGATE_ESCAPE.search(text) is not None or SURROGATE.search(text) is not None
    # A NUL byte: UTF-16 or UTF-32 (JSON as UTF-8 has none), whose surrogates the pattern does not see.
    return b"\x00" in text or _SURROGATE_ESCAPE_BYTES.search(text) is not None


def _check_text(value: Any) -> None:
    """Raise `JsonLimitError` when a string of `value` (a key or a value, at any depth) holds a lone surrogate."""
    stack: list[Any] = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, str) and (found := SURROGATE.search(node)) is not None:
            code_point = f"U+{ord(found.group()):04X}"  # named by code point: the message must be encodable itself
            raise JsonLimitError("unicode", f"a string holds a lone UTF-16 surrogate {code_point}, which is not text")


def check_depth(value: Any, limit: int = MAX_JSON_DEPTH) -> None:
    """Raise `JsonLimitError` when `value` (parsed JSON) nests deeper than `limit` (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > limit:
            raise JsonLimitError("depth", f"the JSON nests deeper than {limit} levels")
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))


__all__ = ["MAX_INTEGER_DIGITS", "MAX_JSON_DEPTH", "MAX_NUMBER_CHARS", "JsonLimitError", "check_depth", "loads"]
