"""Schemas whose check costs time: a legitimate one in proportion to the value (rows, each through a `$ref`, an
`anyOf` and a pattern, with unique tags) and a hostile one (`nested`). The schema-check benchmark and the tests of
bounded checks share them."""

from __future__ import annotations

from typing import Any

ROWS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"rows": {"type": "array", "items": {"$ref": "#/$defs/row"}}},
    "$defs": {"row": {
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "name": {"anyOf": [{"type": "string", "pattern": "^[a-z ]+$"}, {"type": "null"}]},
            "tags": {"type": "array", "uniqueItems": True, "items": {"type": "string"}},
        },
        "required": ["id", "name"],
    }},
    "required": ["rows"],
}


def rows(count: int) -> list[dict[str, Any]]:
    """`count` rows that fit `ROWS_SCHEMA`."""
    return [{"id": index, "name": "name number", "tags": ["a", "b"]} for index in range(count)]


def nested(combinator: str, depth: int = 40) -> dict[str, Any]:
    """A hostile schema: `depth` levels of `{combinator: [level below, level below]}` through `$defs`, 2^depth
    evaluations of a value (the check's deadline stops it)."""
    defs: dict[str, Any] = {"d0": {"type": "integer"}}
    for level in range(1, depth):
        below = {"$ref": f"#/$defs/d{level - 1}"}
        defs[f"d{level}"] = {combinator: [below, dict(below)]}
    return {"$defs": defs, "type": "object", "properties": {"x": {"$ref": f"#/$defs/d{depth - 1}"}}}
