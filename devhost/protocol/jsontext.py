"""JSON texts the way `json.dumps` writes them, from encoders built once.

`json.dumps(value, ensure_ascii=False, ...)` builds a `JSONEncoder` and its C encoder on every call; devhost writes
a few dozen small texts per episode (events, action inputs, results), where that set-up costs more than the encoding
(`compact_json` of a small dict: ~7 us, ~1 us here). The texts are the very ones `json.dumps` gives. Without the
circular-reference check: every value written here is built by devhost or decoded from JSON, so it cannot contain
itself (and a reference check's memo would be shared by the threads that call these).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any


def _unserialisable(value: Any) -> Any:
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


def _encoder(item_separator: str, key_separator: str) -> Callable[[Any], str]:
    """`json.dumps(value, ensure_ascii=False, separators=(item_separator, key_separator))`."""
    if c_make_encoder is None:  # a Python without the _json accelerator
        separators = (item_separator, key_separator)
        return lambda value: json.dumps(value, ensure_ascii=False, separators=separators)
    encode = c_make_encoder(None, _unserialisable, encode_basestring, None, key_separator, item_separator,
                            False, False, True)

    def dumps(value: Any) -> str:
        if isinstance(value, str):  # (as JSONEncoder.encode does)
            return encode_basestring(value)
        return "".join(encode(value, 0))

    return dumps


# Newtonsoft `Formatting.None`: no whitespace, non-ASCII kept as is.
compact_json = _encoder(",", ":")
# `json.dumps(value, ensure_ascii=False)`: Python's default separators.
spaced_json = _encoder(", ", ": ")
