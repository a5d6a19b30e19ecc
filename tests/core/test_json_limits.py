"""`agent_runtime.json_limits`: the one reader of outside JSON (request bodies, model answers, tool arguments)."""

from __future__ import annotations

import json

import pytest

from agent_runtime import json_limits
from agent_runtime.json_limits import MAX_INTEGER_DIGITS, MAX_JSON_DEPTH, JsonLimitError
from agent_runtime.messages import FunctionCallContent
from agent_runtime.models.openai_wire import parse_arguments


def nested(levels: int) -> str:
    return "[" * levels + "1" + "]" * levels


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (nested(MAX_JSON_DEPTH + 1), "depth"),
        (nested(100_000), "depth"),  # past Python's own recursion limit: refused, not a RecursionError
        ("9" * (MAX_INTEGER_DIGITS + 1), "number"),
        ("-" + "9" * 5000, "number"),
        ("1e999", "number"),
        ("1." + "0" * 100, "number"),
        ("NaN", "syntax"),
        ('{"a": Infinity}', "syntax"),
    ],
)
def test_past_a_limit_is_refused_by_kind(text: str, kind: str) -> None:
    with pytest.raises(JsonLimitError) as refused:
        json_limits.loads(text)
    assert refused.value.kind == kind


def test_at_the_limits_is_read() -> None:
    assert json_limits.loads(nested(MAX_JSON_DEPTH)) == json.loads(nested(MAX_JSON_DEPTH))
    assert json_limits.loads("-" + "9" * MAX_INTEGER_DIGITS) == -int("9" * MAX_INTEGER_DIGITS)
    assert json_limits.loads('{"a": 1.5e300, "b": "' + "[" * 1000 + '"}')["a"] == 1.5e300
    with pytest.raises(json.JSONDecodeError):
        json_limits.loads("{")


def test_a_models_hostile_tool_arguments_are_reported_not_crashing() -> None:
    deep = '{"a": ' + nested(5000) + "}"
    assert parse_arguments(deep) == deep  # kept as text: the step tells the model they are unusable
    with pytest.raises(ValueError, match="deeper than"):
        FunctionCallContent(call_id="c", name="t", arguments=deep).parse_arguments()
