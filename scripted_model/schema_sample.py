"""A small value that satisfies a JSON schema: what the server answers to a structured-output request that its
script did not script an answer for (so the offline demo and benchmarks never return invalid structured output)."""

from __future__ import annotations

from typing import Any

_MAX_DEPTH = 8


def sample_for_schema(schema: dict[str, Any], root: dict[str, Any] | None = None, depth: int = 0) -> Any:
    root = root if root is not None else schema
    if depth > _MAX_DEPTH:
        return None
    if "$ref" in schema:
        return sample_for_schema(_resolve(root, schema["$ref"]), root, depth + 1)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    for key in ("anyOf", "oneOf", "allOf"):
        options = [o for o in schema.get(key) or [] if o.get("type") != "null"] or schema.get(key)
        if options:
            return sample_for_schema(options[0], root, depth + 1)
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        properties: dict[str, Any] = schema.get("properties") or {}
        return {name: sample_for_schema(sub, root, depth + 1) for name, sub in properties.items()}
    if kind == "array":
        minimum = int(schema.get("minItems", 0))
        item = schema.get("items") or {}
        return [sample_for_schema(item, root, depth + 1) for _ in range(max(minimum, 1 if item else 0))]
    if kind == "string":
        return "x" * max(int(schema.get("minLength", 0)), 0) or "example"
    if kind == "integer":
        return int(schema.get("minimum", 0))
    if kind == "number":
        return float(schema.get("minimum", 0))
    if kind == "boolean":
        return True
    return None


def _resolve(root: dict[str, Any], ref: str) -> dict[str, Any]:
    if not ref.startswith("#/"):
        return {}
    node: Any = root
    for part in ref[2:].split("/"):
        node = node.get(part, {}) if isinstance(node, dict) else {}
    return node if isinstance(node, dict) else {}
