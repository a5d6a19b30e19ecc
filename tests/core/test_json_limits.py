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


@pytest.mark.parametrize(
    "text",
    [
        '"\\ud800"',
        '{"a": ["x", {"b": "text \\udfff text"}]}',
        '{"\\udbff": 1}',  # a key
        '"\\ude00\\ud83d"',  # a pair in the wrong order is two lone ones
        '"\ud800"',  # a str holding the surrogate itself (text that was JSON-decoded once already)
    ],
)
def test_a_lone_surrogate_is_refused(text: str) -> None:
    """Valid escape syntax but not Unicode text: nothing after the edge could store or send it as UTF-8."""
    with pytest.raises(JsonLimitError) as refused:
        json_limits.loads(text)
    assert refused.value.kind == "unicode"
    str(refused.value).encode()  # the message names it by code point: it encodes itself


def test_a_lone_surrogate_in_bytes_is_refused() -> None:
    """A request body: the escape, or the surrogate encoded (not UTF-8, but `json.loads` decodes bytes with
    "surrogatepass")."""
    for body in (b'{"input": "\\ud800"}', '{"input": "\ud800"}'.encode("utf-8", "surrogatepass")):
        with pytest.raises(JsonLimitError):
            json_limits.loads(body)
    assert json_limits.loads('{"input": "caf\u00e9 \U0001f600"}'.encode()) == {"input": "caf\u00e9 \U0001f600"}


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be", "utf-16", "utf-32"])
def test_a_lone_surrogate_in_a_utf16_or_utf32_body_is_refused(encoding: str) -> None:
    """`json.loads` reads a body in UTF-16 or UTF-32 too (with "surrogatepass"), where a surrogate is no UTF-8 byte
    sequence the search looks for: a forged body of that kind is refused all the same."""
    with pytest.raises(JsonLimitError):
        json_limits.loads('{"input": "\ud800"}'.encode(encoding, "surrogatepass"))
    assert json_limits.loads('{"input": "caf\u00e9"}'.encode(encoding)) == {"input": "caf\u00e9"}


def test_surrogate_pairs_and_escaped_backslashes_are_text() -> None:
    assert json_limits.loads('"\\ud83d\\ude00"') == "\U0001f600"
    assert json_limits.loads(b'{"a": "\\\\ud800"}') == {"a": "\\ud800"}  # a backslash, then letters


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
